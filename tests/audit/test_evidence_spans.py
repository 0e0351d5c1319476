"""Evidence spans as gold: the overlap rule, provenance on the wire, the gold precedence, and the
store table and the import format."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from ragtrace import semconv
from ragtrace_evaluator.audit.evidence import MIN_SHARE, Provenance, overlap, phantom_id, provenance, resolve
from ragtrace_evaluator.audit.run import evidence_for
from ragtrace_store import (
    DocumentRef,
    GoldSource,
    GoldSpan,
    GoldSpanError,
    read_gold_spans,
    read_span_lines,
    write_gold_spans,
)


def meta(source: str, start: int, end: int, **extra: Any) -> str:
    return json.dumps({semconv.PROVENANCE_SOURCE_ID: source, semconv.PROVENANCE_START: start,
                       semconv.PROVENANCE_END: end, **extra})


@pytest.mark.parametrize(("chunk", "span", "counts"), [
    ((0, 300), (120, 180), True),     # the chunk holds the whole evidence sentence
    ((150, 400), (120, 180), True),   # 30 of the span's 60 characters: exactly half of the shorter
    ((155, 400), (120, 180), False),  # 25 of 60: grazes it
    ((0, 100), (40, 1000), True),     # a small chunk lying mostly (60 of its 100) inside a long passage
    ((0, 100), (60, 1000), False),    # 40 of its 100
    ((300, 400), (120, 180), False),  # disjoint
    ((180, 300), (120, 180), False),  # touching ends share nothing (end is exclusive)
])
def test_what_overlap_counts(chunk: tuple[int, int], span: tuple[int, int], counts: bool) -> None:
    assert MIN_SHARE == 0.5
    assert overlap(Provenance("d1", *chunk), GoldSpan("q", "d1", *span)) is counts
    assert overlap(Provenance("d2", *chunk), GoldSpan("q", "d1", *span)) is False  # another source


def test_provenance_is_read_from_document_metadata_and_malformed_provenance_is_none() -> None:
    assert provenance(meta("d1", 3, 9, title="T")) == Provenance("d1", 3, 9)
    assert provenance({semconv.PROVENANCE_SOURCE_ID: "d1", semconv.PROVENANCE_START: 0,
                       semconv.PROVENANCE_END: 5}) == Provenance("d1", 0, 5)
    for bad in ("", "not json", "[1, 2]", json.dumps({"title": "x"}), meta("d1", 9, 3), meta("", 0, 5),
                json.dumps({semconv.PROVENANCE_SOURCE_ID: "d1", semconv.PROVENANCE_START: True,
                            semconv.PROVENANCE_END: 5})):
        assert provenance(bad) is None, bad


def test_resolution_keeps_unfound_evidence_as_never_retrieved_gold() -> None:
    docs = [DocumentRef("c0", 0, metadata=meta("d1", 0, 100)), DocumentRef("c1", 1, metadata=meta("d1", 100, 200)),
            DocumentRef("x", 2, metadata=meta("d9", 0, 50)), DocumentRef("plain", 3, metadata="")]
    spans = [GoldSpan("q", "d1", 110, 150), GoldSpan("q", "d2", 0, 40)]
    got = resolve(spans, docs)
    assert got is not None and got.n_spans == 2 and got.n_found == 1
    assert got.gold == {"c1", phantom_id(spans[1])}
    # no document can be placed: the spans decide nothing (the audit falls back to other gold)
    assert resolve(spans, [DocumentRef("plain", 0)]) is None


class _Rec:
    def __init__(self, gold_ids: tuple[str, ...] = ()) -> None:
        self.retrieved = (DocumentRef("d1#0", 0, metadata=meta("d1", 0, 90)),
                          DocumentRef("d1#1", 1, metadata=meta("d1", 90, 200)),
                          DocumentRef("d7", 2, metadata=meta("d7", 0, 120)))
        self.reranked = ()
        self.context = self.retrieved[:2]
        self.gold_ids = gold_ids
        self.query = "q?"
        self.answer = "a"


def test_gold_precedence_span_ids_then_evidence_then_qrels() -> None:
    spans = (GoldSpan("q", "d1", 100, 150),)
    # evidence spans beat chunk-id qrels: the qrels name a chunk of another build
    ev = evidence_for(_Rec(("d1",)), GoldSource.QRELS, None, spans)
    assert ev.gold == {"d1#1"} and ev.gold_source is GoldSource.EVIDENCE
    # gold ids on the trace's own spans beat both (the service knows its own build)
    ev = evidence_for(_Rec(("d7",)), GoldSource.SPAN, None, spans)
    assert ev.gold == {"d7"} and ev.gold_source is GoldSource.SPAN
    # without spans, qrels as before
    ev = evidence_for(_Rec(("d1",)), GoldSource.QRELS, None, ())
    assert ev.gold == {"d1"} and ev.gold_source is GoldSource.QRELS


def test_the_span_file_format_and_its_errors(tmp_path: Path) -> None:
    good = tmp_path / "spans.jsonl"
    good.write_text('{"query_id": "q1", "source_id": "d1", "start": 3, "end": 9}\n\n'
                    '{"query_id": 7, "source_id": "d2", "start": 0, "end": 4, "relevance": 2}\n', encoding="utf-8")
    assert read_span_lines(good) == [GoldSpan("q1", "d1", 3, 9), GoldSpan("7", "d2", 0, 4, 2)]
    for line, message in (('{"query_id": "q1", "source_id": "d1", "start": 9, "end": 3}', "need 0 <= start < end"),
                          ('{"query_id": "q1", "source_id": "d1", "start": 0}', "missing 'end'"),
                          ('{"query_id": "q1", "source_id": "d1", "start": 0, "end": 4, "doc": 1}', "unknown keys"),
                          ('{"query_id": "q1", "source_id": "", "start": 0, "end": 4}', "'source_id' must be"),
                          ('{"query_id": "q1", "source_id": "d", "start": "0", "end": 4}', "must be an integer"),
                          ("[1]", "not an object"), ("{oops", "not valid JSON")):
        bad = tmp_path / "bad.jsonl"
        bad.write_text('{"query_id": "q0", "source_id": "d1", "start": 0, "end": 1}\n' + line + "\n",
                       encoding="utf-8")
        with pytest.raises(GoldSpanError, match=r"bad\.jsonl:2: ") as exc:
            read_span_lines(bad)
        assert message in str(exc.value) and '"source_id"' in str(exc.value)


def test_spans_round_trip_through_the_store(chdb_store: Any) -> None:
    tenant = f"spans-{uuid.uuid4().hex[:8]}"
    spans = [GoldSpan("q1", "d1", 3, 9), GoldSpan("q1", "d2", 0, 4, 2), GoldSpan("q2", "d1", 5, 6, 0)]
    assert write_gold_spans(chdb_store, spans, tenant=tenant) == 3
    write_gold_spans(chdb_store, spans[:1], tenant=tenant)  # a re-import replaces, never doubles
    got = read_gold_spans(chdb_store, tenant=tenant, query_ids=["q1", "q2", "q3"])
    assert got == {"q1": (GoldSpan("q1", "d1", 3, 9), GoldSpan("q1", "d2", 0, 4, 2))}  # relevance 0 is not gold
    assert read_gold_spans(chdb_store, tenant=tenant + "x", query_ids=["q1"]) == {}
