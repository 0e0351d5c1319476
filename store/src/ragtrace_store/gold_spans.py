"""Gold as evidence spans: (query id, source document id, character span), stored in ``gold_spans``.

A chunk id names a piece of one build of the index, so chunk-id gold expires when the index is
re-cut. An evidence span names the evidence in its source document and holds for every build: the
audit resolves it per trace to the retrieved chunks that overlap it, from the chunks' provenance
(`ragtrace.semconv.PROVENANCE_SOURCE_ID` / ``_START`` / ``_END`` in ``document.metadata``).

`write_gold_spans` / `read_gold_spans` are the one writer and reader of the table. Offsets are
character offsets into the source document's text, from 0, ``start`` inclusive and ``end``
exclusive, so ``text[start:end]`` is the evidence.

The file `ragtrace labels import` reads (`read_span_lines`) is JSON Lines, one span a line::

    {"query_id": "q000012", "source_id": "d000012", "start": 118, "end": 164}
    {"query_id": "q000012", "source_id": "d000031", "start": 0, "end": 52, "relevance": 2}

``relevance`` is optional (default 1; 0 records a span judged not relevant, which is never gold).
A query may have several spans, in one or several source documents.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragtrace_store.clock import as_utc, utc_now
from ragtrace_store.errors import StoreError
from ragtrace_store.json_lines import json_line_values

if TYPE_CHECKING:
    from ragtrace_store.client import Store

__all__ = ["GOLD_SPAN_COLUMNS", "SPAN_KEYS", "GoldSpan", "GoldSpanError", "read_gold_spans", "read_span_lines",
           "write_gold_spans"]

GOLD_SPAN_COLUMNS = ("tenant", "query_id", "source_id", "span_start", "span_end", "relevance", "source", "added_at")
_READ_CHUNK = 5000
#: the keys of one line of a span file (``relevance`` optional)
SPAN_KEYS = ("query_id", "source_id", "start", "end", "relevance")
_SHAPE = ('each line must be a JSON object {"query_id": "q1", "source_id": "doc-7", "start": 120, "end": 180} '
          '(character offsets into the source document, end exclusive; optional "relevance", default 1)')


class GoldSpanError(StoreError, ValueError):
    """A gold span that cannot be stored; the message says which field and what to fix."""


@dataclass(frozen=True)
class GoldSpan:
    """The evidence of one query: ``source_id``'s text from ``start`` (inclusive) to ``end`` (exclusive)."""

    query_id: str
    source_id: str
    start: int
    end: int
    #: > 0 relevant (graded like TREC qrels); 0 a span judged not relevant
    relevance: int = 1

    def __post_init__(self) -> None:
        for name in ("query_id", "source_id"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise GoldSpanError(f"gold span: {name!r} must be a non-empty string, got {value!r}")
        for name in ("start", "end", "relevance"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise GoldSpanError(f"gold span {self.query_id}: {name!r} must be an integer, got {value!r}")
        if self.start < 0 or self.end <= self.start:
            raise GoldSpanError(f"gold span {self.query_id} in {self.source_id}: need 0 <= start < end (character "
                                f"offsets, end exclusive), got start={self.start}, end={self.end}")

    @property
    def length(self) -> int:
        return self.end - self.start


def write_gold_spans(store: Store, spans: Iterable[GoldSpan], *, tenant: str, source: str = "import",
                     added_at: datetime | None = None) -> int:
    """Insert the spans (a re-import of the same span replaces it); returns how many were written."""
    at = as_utc(added_at) if added_at else utc_now()
    rows = [(tenant, s.query_id, s.source_id, s.start, s.end, s.relevance, source, at) for s in spans]
    for i in range(0, len(rows), 50_000):
        store.insert("gold_spans", rows[i : i + 50_000], GOLD_SPAN_COLUMNS)
    return len(rows)


def read_gold_spans(store: Store, *, tenant: str, query_ids: Sequence[str]) -> dict[str, tuple[GoldSpan, ...]]:
    """The relevant spans (relevance > 0) of each query id that has some, in source and offset order."""
    ids = sorted({q for q in query_ids if q})
    out: dict[str, list[GoldSpan]] = {}
    for i in range(0, len(ids), _READ_CHUNK):
        rows = store.query_rows(
            f"SELECT query_id, source_id, span_start, span_end, relevance FROM {store.table('gold_spans')} FINAL "
            "WHERE tenant = {tenant:String} AND relevance > 0 AND query_id IN {qids:Array(String)} "
            "ORDER BY query_id, source_id, span_start, span_end",
            {"tenant": tenant, "qids": ids[i : i + _READ_CHUNK]})
        for qid, src, start, end, rel in rows:
            out.setdefault(qid, []).append(GoldSpan(qid, src, int(start), int(end), int(rel)))
    return {q: tuple(v) for q, v in out.items()}


def _span_from(obj: Any, where: str) -> GoldSpan:
    if not isinstance(obj, dict):
        raise GoldSpanError(f"{where}: not an object (a JSON {type(obj).__name__}); {_SHAPE}")
    unknown = sorted(set(obj) - set(SPAN_KEYS))
    if unknown:
        raise GoldSpanError(f"{where}: unknown keys {unknown}; {_SHAPE}")
    missing = [k for k in SPAN_KEYS[:4] if k not in obj]
    if missing:
        raise GoldSpanError(f"{where}: missing {', '.join(repr(k) for k in missing)}; {_SHAPE}")
    qid = obj["query_id"]
    if isinstance(qid, int) and not isinstance(qid, bool):
        qid = str(qid)
    try:
        return GoldSpan(qid.strip() if isinstance(qid, str) else qid, obj["source_id"], obj["start"], obj["end"],
                        obj.get("relevance", 1))
    except GoldSpanError as exc:
        raise GoldSpanError(f"{where}: {str(exc).removeprefix('gold span: ')}; {_SHAPE}") from None


def read_span_lines(path: str | Path) -> list[GoldSpan]:
    """The spans of a JSON Lines span file (blank lines skipped); errors name ``PATH:N`` and the fix
    (`ragtrace_store.json_lines`)."""
    return [_span_from(obj, where) for where, obj in json_line_values(path, GoldSpanError, _SHAPE)]
