"""Document shapes people have: dicts, tuples, LangChain- and LlamaIndex-style objects, adapters."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest

import ragtrace
from ragtrace import semconv as sc
from ragtrace._documents import Document, DocumentShapeError, to_document

from .util import sha


@dataclass
class LCDocument:  # the shape of langchain_core.documents.Document
    page_content: str
    metadata: dict[str, Any] = field(default_factory=dict)
    id: str | None = None


@dataclass
class TextNode:  # the shape of llama_index.core.schema.TextNode
    text: str
    node_id: str
    metadata: dict[str, Any] = field(default_factory=dict)

    def get_content(self) -> str:
        return self.text


@dataclass
class NodeWithScore:
    node: TextNode
    score: float | None = None


@pytest.mark.parametrize(("raw", "expected"), [
    ({"id": "a", "text": "t", "score": 0.5}, Document("a", "t", 0.5)),
    ({"doc_id": 7, "content": "t"}, Document("7", "t", None)),
    ({"page_content": "t", "metadata": {"id": "m1", "src": "wiki"}},
     Document("m1", "t", None, {"id": "m1", "src": "wiki"})),
    ({"_id": "x", "passage": "p", "relevance_score": "0.25"}, Document("x", "p", 0.25)),
    (("id1", "text one", 0.9), Document("id1", "text one", 0.9)),
    (("id2", "text two"), Document("id2", "text two", None)),
    ((LCDocument("lc text", {"doc_id": "lc1"}), 0.3), Document("lc1", "lc text", 0.3, {"doc_id": "lc1"})),
    (LCDocument("lc", {"source": "s"}, id="lc-id"), Document("lc-id", "lc", None, {"source": "s"})),
    (NodeWithScore(TextNode("node text", "n-1", {"page": 3}), 0.75), Document("n-1", "node text", 0.75, {"page": 3})),
    (TextNode("bare node", "n-2"), Document("n-2", "bare node", None)),
    ("just a passage", Document(None, "just a passage")),
    (Document("d", "x", 1.0), Document("d", "x", 1.0)),
])
def test_shapes(raw: Any, expected: Document) -> None:
    assert to_document(raw) == expected


def test_unknown_shape_raises_a_clear_error() -> None:
    with pytest.raises(DocumentShapeError, match="adapter="):
        to_document(object())
    with pytest.raises(DocumentShapeError):
        to_document((1, 2, 3, 4))


def test_adapter_and_metadata_json_and_missing_id_uses_hash(memory: Any) -> None:
    class Hit:
        def __init__(self, key: str, body: str) -> None:
            self.key, self.body = key, body

    @ragtrace.retriever(adapter=lambda h: {"id": h.key, "text": h.body, "metadata": {"k": 1}})
    def search(query: str) -> list[Hit]:
        return [Hit("h1", "first"), Hit("h2", "second")]

    @ragtrace.retriever
    def anonymous(query: str) -> list[str]:
        return ["no id here"]

    search("q")
    anonymous("q")
    first, second = memory()
    attrs = first.attributes or {}
    assert attrs[f"{sc.RETRIEVAL_DOCUMENTS}.1.{sc.DOCUMENT_ID}"] == "h2"
    assert attrs[f"{sc.RETRIEVAL_DOCUMENTS}.1.{sc.DOCUMENT_CONTENT}"] == "second"
    assert orjson.loads(str(attrs[f"{sc.RETRIEVAL_DOCUMENTS}.0.{sc.DOCUMENT_METADATA}"])) == {"k": 1}
    attrs2 = second.attributes or {}
    assert attrs2[f"{sc.RETRIEVAL_DOCUMENTS}.0.{sc.DOCUMENT_ID}"] == "sha256:" + sha("no id here")[:16]


def test_unreadable_document_keeps_its_rank_slot(memory: Any) -> None:
    @ragtrace.retriever
    def search(query: str) -> list[Any]:
        return [{"id": "a", "text": "x"}, object(), {"id": "c", "text": "z"}]

    assert len(search("q")) == 3  # the caller gets its result regardless
    (span,) = memory()
    attrs = span.attributes or {}
    assert attrs[f"{sc.RETRIEVAL_DOCUMENTS}.0.{sc.DOCUMENT_ID}"] == "a"
    assert f"{sc.RETRIEVAL_DOCUMENTS}.1.{sc.DOCUMENT_ID}" not in attrs
    assert attrs[f"{sc.RETRIEVAL_DOCUMENTS}.2.{sc.DOCUMENT_ID}"] == "c"


def test_failing_adapter_never_reaches_the_caller(memory: Any) -> None:
    def adapter(doc: Any) -> dict[str, Any]:
        raise KeyError("adapter bug")

    @ragtrace.retriever(adapter=adapter)
    def search(query: str) -> list[int]:
        return [1, 2]

    assert search("q") == [1, 2]
    (span,) = memory()
    assert (span.attributes or {})[sc.SPAN_KIND] == "RETRIEVER"
