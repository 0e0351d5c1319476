"""Recognising documents in the shapes retrievers return.

This runs on the export thread, never on the request path: the decorators keep a shallow copy of
the list the service returned and the shapes are read only when spans are flattened.

Recognised, in this order:

- ``ragtrace.Document`` itself;
- mappings: id from ``id``/``doc_id``/``document_id``/``_id``/``node_id``, text from
  ``text``/``content``/``page_content``/``passage``/``body``, ``score`` (or ``relevance_score``/
  ``similarity``/``distance``), ``metadata`` (a nested mapping whose ``id`` is used when there is no
  top-level id);
- tuples and lists: ``(id, text)``, ``(id, text, score)``, or ``(document, score)`` as LangChain's
  ``similarity_search_with_score`` returns;
- LlamaIndex-style ``NodeWithScore``: ``.node`` (with ``node_id``/``id_``, ``get_content()`` or
  ``text``, ``metadata``) and ``.score``;
- LangChain-style objects: ``.page_content``, ``.metadata``, optional ``.id``;
- other objects with ``id``/``doc_id`` and ``text``/``content`` attributes;
- a bare string: text only.

Text given as bytes is read as UTF-8 (undecodable bytes replaced), as an answer's is.

Anything else goes through an ``adapter=`` function given to the decorator or the explicit API,
which returns a ``Document`` or a mapping in the shapes above.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

_ID_KEYS = ("id", "doc_id", "document_id", "_id", "node_id")
_TEXT_KEYS = ("text", "content", "page_content", "passage", "body")
_SCORE_KEYS = ("score", "relevance_score", "similarity", "distance")


@dataclass(frozen=True)
class Document:
    """One document as ragtrace records it. ``score`` is whatever the stage ranked by."""

    id: str | None = None
    text: str | None = None
    score: float | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


Adapter = Callable[[Any], "Document | Mapping[str, Any]"]


class DocumentShapeError(TypeError):
    """A document in a shape ragtrace does not know; pass ``adapter=`` to the decorator."""


def _score(value: object) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def _id(value: object) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else str(value)


def _text(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes | bytearray):  # its text, as for an answer; str() gave "b'...'"
        return bytes(value).decode("utf-8", "replace")
    return value if isinstance(value, str) else str(value)


def _first(mapping: Mapping[str, Any], keys: tuple[str, ...]) -> object:
    for key in keys:
        value = mapping.get(key)
        if value is not None:
            return value
    return None


def _from_mapping(doc: Mapping[str, Any]) -> Document:
    meta = doc.get("metadata")
    metadata: Mapping[str, Any] = meta if isinstance(meta, Mapping) else {}
    doc_id = _first(doc, _ID_KEYS)
    if doc_id is None and metadata:
        doc_id = _first(metadata, _ID_KEYS)
    return Document(_id(doc_id), _text(_first(doc, _TEXT_KEYS)), _score(_first(doc, _SCORE_KEYS)), metadata)


def _from_object(doc: object) -> Document | None:
    node = getattr(doc, "node", None)
    if node is not None and hasattr(doc, "score"):  # LlamaIndex NodeWithScore
        inner = _from_object(node)
        if inner is None:
            return None
        return Document(inner.id, inner.text, _score(getattr(doc, "score", None)), inner.metadata)
    meta = getattr(doc, "metadata", None)
    metadata: Mapping[str, Any] = meta if isinstance(meta, Mapping) else {}
    if hasattr(doc, "page_content"):  # LangChain Document
        doc_id = getattr(doc, "id", None)
        if doc_id is None and metadata:
            doc_id = _first(metadata, _ID_KEYS)
        return Document(_id(doc_id), _text(doc.page_content), _score(getattr(doc, "score", None)), metadata)
    doc_id = None
    for name in ("node_id", "id_", "id", "doc_id", "document_id"):
        doc_id = getattr(doc, name, None)
        if doc_id is not None:
            break
    text: object = None
    get_content = getattr(doc, "get_content", None)
    if callable(get_content):  # LlamaIndex TextNode
        text = get_content()
    else:
        for name in ("text", "content"):
            text = getattr(doc, name, None)
            if text is not None:
                break
    if doc_id is None and text is None:
        return None
    return Document(_id(doc_id), _text(text), _score(getattr(doc, "score", None)), metadata)


def to_document(doc: object, adapter: Adapter | None = None) -> Document:
    """Normalise one document; raises DocumentShapeError for a shape it cannot read."""
    if adapter is not None:
        doc = adapter(doc)
    if isinstance(doc, Document):
        return doc
    if isinstance(doc, str):
        return Document(None, doc)
    if isinstance(doc, bytes | bytearray):
        return Document(None, _text(doc))
    if isinstance(doc, Mapping):
        return _from_mapping(doc)
    if isinstance(doc, tuple | list):
        if len(doc) in (2, 3) and isinstance(doc[1], str | bytes) and not isinstance(doc[0], Mapping):
            return Document(_id(doc[0]), _text(doc[1]), _score(doc[2]) if len(doc) == 3 else None)
        if len(doc) == 2 and _score(doc[1]) is not None:  # (document, score)
            inner = to_document(doc[0])
            return Document(inner.id, inner.text, _score(doc[1]), inner.metadata)
        raise DocumentShapeError(f"tuple of length {len(doc)} is not (id, text[, score]) or (document, score)")
    found = _from_object(doc)
    if found is None:
        raise DocumentShapeError(f"cannot read a document from {type(doc).__name__}; pass adapter=")
    return found


def capture(value: object) -> list[Any] | None:
    """What the request path keeps of a document list: a shallow copy, nothing else.

    Only real sequences are copied; an iterator would be consumed, so it is not recorded.
    """
    if isinstance(value, list | tuple):
        return list(value)
    return None
