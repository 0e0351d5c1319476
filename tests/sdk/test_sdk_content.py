"""Content modes (full, truncation, hash only) and redaction before anything leaves the process."""

from __future__ import annotations

import re
from typing import Any

import ragtrace
from ragtrace import semconv as sc

from .util import by_name, sha

PASSAGES = [{"id": "p1", "text": "Call Ann at ann@example.com about the 2019 report."},
            {"id": "p2", "text": "Short."}]


def _run() -> None:
    @ragtrace.retriever
    def retrieve(query: str) -> list[dict[str, Any]]:
        return PASSAGES

    @ragtrace.generator
    def generate(prompt: str, context: list[dict[str, Any]]) -> str:
        return "Mail ann@example.com for the report."

    @ragtrace.pipeline
    def answer(query: str) -> str:
        return generate(query, retrieve(query))

    answer("What did ann@example.com write?")


def _content(attrs: Any, prefix: str, i: int) -> Any:
    return attrs.get(f"{prefix}.{i}.{sc.DOCUMENT_CONTENT}")


def test_truncation_keeps_hash_of_full_text(configure_memory: Any) -> None:
    spans = configure_memory(content=10)
    _run()
    got = by_name(spans())
    ret = got["retrieve"].attributes or {}
    assert _content(ret, sc.RETRIEVAL_DOCUMENTS, 0) == PASSAGES[0]["text"][:10]
    assert _content(ret, sc.RETRIEVAL_DOCUMENTS, 1) == "Short."
    assert ret[f"{sc.RETRIEVAL_DOCUMENTS}.0.{sc.DOCUMENT_CONTENT_HASH}"] == sha(PASSAGES[0]["text"])
    assert (got["answer"].attributes or {})[sc.CONTENT_MODE] == "truncate:10"
    # query and answer are not truncated (the evaluator needs them); use redact= to hide them
    assert (got["answer"].attributes or {})[sc.OUTPUT_VALUE] == "Mail ann@example.com for the report."


def test_hash_mode_sends_ids_and_hashes_only(configure_memory: Any) -> None:
    spans = configure_memory(content="hash")
    _run()
    got = by_name(spans())
    for name, prefix in (("retrieve", sc.RETRIEVAL_DOCUMENTS), ("generate", sc.CONTEXT_DOCUMENTS)):
        attrs = got[name].attributes or {}
        assert not any(k.endswith("." + sc.DOCUMENT_CONTENT) for k in attrs)
        assert attrs[f"{prefix}.1.{sc.DOCUMENT_ID}"] == "p2"
        assert attrs[f"{prefix}.1.{sc.DOCUMENT_CONTENT_HASH}"] == sha("Short.")


def test_redaction_applies_to_query_passages_prompt_and_answer(configure_memory: Any) -> None:
    def redact(text: str) -> str:
        return re.sub(r"\S+@\S+\.\w+", "<email>", text)

    spans = configure_memory(redact=redact)
    _run()
    got = spans()
    everything = " ".join(str(v) for s in got for v in (s.attributes or {}).values())
    assert "ann@example.com" not in everything
    by = by_name(got)
    assert (by["answer"].attributes or {})[sc.INPUT_VALUE] == "What did <email> write?"
    assert (by["generate"].attributes or {})[sc.OUTPUT_VALUE] == "Mail <email> for the report."
    redacted = "Call Ann at <email> about the 2019 report."
    ret = by["retrieve"].attributes or {}
    assert _content(ret, sc.RETRIEVAL_DOCUMENTS, 0) == redacted
    # the hash is of the redacted text: the original never leaves, not even as a hash
    assert ret[f"{sc.RETRIEVAL_DOCUMENTS}.0.{sc.DOCUMENT_CONTENT_HASH}"] == sha(redacted)


def test_failing_redactor_leaves_text_out_never_unredacted(configure_memory: Any) -> None:
    def redact(text: str) -> str:
        if "ann@" in text:
            raise RuntimeError("redactor bug")
        return text

    spans = configure_memory(redact=redact)
    _run()
    got = spans()
    everything = " ".join(str(v) for s in got for v in (s.attributes or {}).values())
    assert "ann@example.com" not in everything
    ret = by_name(got)["retrieve"].attributes or {}
    assert _content(ret, sc.RETRIEVAL_DOCUMENTS, 1) == "Short."
    assert ret[f"{sc.RETRIEVAL_DOCUMENTS}.0.{sc.DOCUMENT_ID}"] == "p1"  # the id is kept
