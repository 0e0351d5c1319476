"""Evidence-span gold placed on one trace's chunks.

An evidence span (`ragtrace_store.GoldSpan`: a source document and a character span) names the
evidence in its source, whatever the build of the index; what a reader of one trace needs is which of
the chunks that trace saw hold it. Each retrieved, reranked or supplied chunk carries its provenance
in ``document.metadata`` (`ragtrace.semconv.PROVENANCE_SOURCE_ID`, ``PROVENANCE_START``,
``PROVENANCE_END``); a chunk is gold when it overlaps a gold span of the same source document.

What overlap counts: chunk [cs, ce) and span [gs, ge) of the same source overlap when they share at
least ``min_share`` (0.5) of the *shorter* of the two:

    |[cs, ce) ∩ [gs, ge)| >= min_share · min(ce − cs, ge − gs)

so a chunk that holds the evidence sentence counts, a small chunk lying mostly inside a long
evidence passage counts, and a chunk that only grazes the evidence by a few characters at its edge
does not. A span that no chunk of the trace overlaps stays in the audit's gold set as an id that is
never retrieved (``gold-span:SOURCE[START:END]``): the evidence exists and the pipeline did not find
it, which is a retrieval gap, not an unknown.

When no document of the trace carries provenance the spans cannot be placed: `resolve` returns None
and `place_evidence` nothing, and readers fall back to the other gold sources.

The store resolves spans here so that every reader (`read_traces`' ``gold_evidence``, the audit in
`ragtrace_evaluator.audit.evidence`) places them the same way.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragtrace import semconv
from ragtrace_store.gold_spans import GoldSpan

__all__ = ["MIN_SHARE", "GoldEvidence", "Provenance", "ResolvedGold", "overlap", "phantom_id", "place_evidence",
           "provenance", "resolve"]

MIN_SHARE = 0.5


@dataclass(frozen=True)
class Provenance:
    """Where a chunk sits: ``source_id``'s characters ``start`` (inclusive) to ``end`` (exclusive)."""

    source_id: str
    start: int
    end: int


@dataclass(frozen=True)
class GoldEvidence:
    """One evidence span of a trace's query and the chunk of the trace that holds it: ``doc_id`` is
    that chunk's id, '' when no chunk the trace saw overlaps the span (the evidence was not found)."""

    doc_id: str
    source_id: str
    start: int
    end: int

    def as_json(self) -> dict[str, Any]:
        """The ``gold_evidence`` item of `ragtrace traces --json` / ``GET /api/traces`` (``doc_id`` null when
        no chunk of the trace holds the span)."""
        return {"doc_id": self.doc_id or None, "source_id": self.source_id, "start": self.start, "end": self.end}


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def provenance(metadata: str | Mapping[str, Any] | None) -> Provenance | None:
    """A chunk's provenance from its ``document.metadata`` (the JSON string as stored, or a mapping);
    None when it has none or it is malformed (a chunk that cannot be placed is never gold by span)."""
    if not metadata:
        return None
    if isinstance(metadata, str):
        try:
            meta = json.loads(metadata)
        except ValueError:
            return None
    else:
        meta = metadata
    if not isinstance(meta, Mapping):
        return None
    source = meta.get(semconv.PROVENANCE_SOURCE_ID)
    start, end = _int(meta.get(semconv.PROVENANCE_START)), _int(meta.get(semconv.PROVENANCE_END))
    if not isinstance(source, str) or not source or start is None or end is None or not 0 <= start < end:
        return None
    return Provenance(source, start, end)


def overlap(chunk: Provenance, span: GoldSpan, min_share: float = MIN_SHARE) -> bool:
    """Whether the chunk counts for the span (module docstring)."""
    if chunk.source_id != span.source_id:
        return False
    shared = min(chunk.end, span.end) - max(chunk.start, span.start)
    return shared > 0 and shared >= min_share * min(chunk.end - chunk.start, span.end - span.start)


def phantom_id(span: GoldSpan) -> str:
    """The gold id of a span that no chunk of the trace overlaps (never a retrieved id)."""
    return f"gold-span:{span.source_id}[{span.start}:{span.end}]"


@dataclass(frozen=True)
class ResolvedGold:
    """The gold set of one trace: the overlapping chunk ids, plus one never-retrieved id per span
    that nothing overlaps."""

    gold: frozenset[str]
    n_spans: int
    #: spans some chunk of the trace overlaps
    n_found: int


def _placed(docs: Iterable[Any]) -> list[tuple[str, Provenance]]:
    return [(d.id, p) for d in docs if (p := provenance(getattr(d, "metadata", None))) is not None]


def resolve(spans: Sequence[GoldSpan], docs: Iterable[Any], *,
            min_share: float = MIN_SHARE) -> ResolvedGold | None:
    """Resolve ``spans`` against the trace's documents (objects with ``id`` and ``metadata``, e.g.
    `ragtrace_store.DocumentRef`); None when no document has provenance."""
    placed = _placed(docs)
    if not placed:
        return None
    gold: set[str] = set()
    found = 0
    for span in spans:
        hits = {doc_id for doc_id, p in placed if overlap(p, span, min_share)}
        if hits:
            found += 1
            gold |= hits
        else:
            gold.add(phantom_id(span))
    return ResolvedGold(frozenset(gold), len(spans), found)


def place_evidence(spans: Sequence[GoldSpan], docs: Iterable[Any], *,
                   min_share: float = MIN_SHARE) -> tuple[GoldEvidence, ...]:
    """Each span with each chunk of ``docs`` that holds it (one item per chunk, in span then chunk id
    order), or with ``doc_id`` '' when none does; nothing when no document has provenance."""
    placed = _placed(docs)
    if not placed:
        return ()
    out: list[GoldEvidence] = []
    for span in spans:
        hits = sorted({doc_id for doc_id, p in placed if overlap(p, span, min_share)})
        out.extend(GoldEvidence(h, span.source_id, span.start, span.end) for h in hits or [""])
    return tuple(out)
