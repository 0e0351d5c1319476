"""The explicit API (trace_query) and gold/feedback attached after the fact."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from opentelemetry.trace import StatusCode

import ragtrace
from ragtrace import semconv as sc

from .util import FULL, ROOT, by_name, doc_attrs, docs


def test_explicit_query_exact_attributes_and_chained_durations(memory: Any) -> None:
    cands = docs(4)
    with ragtrace.trace_query("where?", query_id="q-9", gold_ids=["d3"]) as q:
        q.retrieved(cands)
        top = [cands[3], cands[0]]
        q.reranked(top, top_k=2, model="ce")
        q.supplied(top)
        q.generated("in d3", model="llm-x")
        trace_id = q.trace_id
    spans = by_name(memory())
    assert set(spans) == {"query", "retrieve", "rerank", "generate"}
    root = spans["query"]
    assert format(root.context.trace_id, "032x") == trace_id
    assert dict(root.attributes or {}) == {
        sc.SPAN_KIND: "CHAIN", sc.INPUT_VALUE: "where?", sc.OUTPUT_VALUE: "in d3", sc.QUERY_ID: "q-9",
        sc.GOLD_DOCUMENT_IDS: ("d3",), **ROOT}
    assert dict(spans["retrieve"].attributes or {}) == {
        sc.SPAN_KIND: "RETRIEVER", sc.INPUT_VALUE: "where?", **doc_attrs(sc.RETRIEVAL_DOCUMENTS, cands), **FULL}
    assert dict(spans["rerank"].attributes or {}) == {
        sc.SPAN_KIND: "RERANKER", sc.RERANKER_QUERY: "where?", sc.RERANKER_TOP_K: 2,
        sc.RERANKER_MODEL_NAME: "ce", **doc_attrs(sc.RERANKER_INPUT_DOCUMENTS, cands),
        **doc_attrs(sc.RERANKER_OUTPUT_DOCUMENTS, top), **FULL}
    assert dict(spans["generate"].attributes or {}) == {
        sc.SPAN_KIND: "LLM", sc.INPUT_VALUE: "where?", sc.OUTPUT_VALUE: "in d3", sc.LLM_MODEL_NAME: "llm-x",
        **doc_attrs(sc.CONTEXT_DOCUMENTS, top), **FULL}
    ordered = [spans[n] for n in ("retrieve", "rerank", "generate")]
    assert ordered[0].start_time == root.start_time
    for before, after in itertools.pairwise(ordered):
        assert before.end_time == after.start_time  # each stage starts where the previous ended
    assert all(s.parent is not None and s.parent.span_id == root.context.span_id for s in ordered)


def test_explicit_answer_and_error_and_nesting_decorated_code(memory: Any) -> None:
    @ragtrace.retriever
    def search(query: str) -> list[str]:
        return ["text"]

    with pytest.raises(KeyError), ragtrace.trace_query("q") as q:
        search("q")
        q.answer("final")
        raise KeyError("late failure")
    spans = by_name(memory())
    root = spans["query"]
    assert root.status.status_code == StatusCode.ERROR
    assert (root.attributes or {})[sc.OUTPUT_VALUE] == "final"
    assert spans["search"].parent is not None and spans["search"].parent.span_id == root.context.span_id


def test_explicit_async_context_manager(memory: Any) -> None:
    async def main() -> None:
        async with ragtrace.trace_query("aq") as q:
            q.generated("done", context=[("id1", "t1")])

    asyncio.run(main())
    spans = by_name(memory())
    assert (spans["generate"].attributes or {})[f"{sc.CONTEXT_DOCUMENTS}.0.{sc.DOCUMENT_ID}"] == "id1"


def test_explicit_unconfigured_is_silent() -> None:
    with ragtrace.trace_query("q") as q:
        q.retrieved([1, 2])
        q.generated("a")
        assert q.trace_id is None and not q.recording


def test_attach_gold_and_feedback_after_the_fact(memory: Any) -> None:
    with ragtrace.trace_query("q") as q:
        q.answer("a")
    trace_id = q.trace_id
    assert trace_id is not None
    assert ragtrace.attach_gold(["d1", "d2"], trace_id=trace_id)
    assert ragtrace.attach_gold(["d9"], query_id="qid-1")
    assert ragtrace.attach_feedback(0.25, trace_id=trace_id.upper(), comment="half right")
    assert ragtrace.attach_feedback(True, query_id="qid-1")
    spans = memory()
    annotations = [s for s in spans if s.name.startswith("ragtrace.annotation.")]
    assert [dict(s.attributes or {}) for s in annotations] == [
        {sc.ANNOTATION_KIND: "gold", sc.ANNOTATES_TRACE_ID: trace_id, sc.GOLD_DOCUMENT_IDS: ("d1", "d2")},
        {sc.ANNOTATION_KIND: "gold", sc.QUERY_ID: "qid-1", sc.GOLD_DOCUMENT_IDS: ("d9",)},
        {sc.ANNOTATION_KIND: "feedback", sc.ANNOTATES_TRACE_ID: trace_id, sc.FEEDBACK_SCORE: 0.25,
         sc.FEEDBACK_COMMENT: "half right"},
        {sc.ANNOTATION_KIND: "feedback", sc.QUERY_ID: "qid-1", sc.FEEDBACK_SCORE: 1.0},
    ]
    for span in annotations:  # each the root of its own trace
        assert span.parent is None
        assert format(span.context.trace_id, "032x") != trace_id


def test_attach_inside_a_query_goes_to_the_current_trace(memory: Any) -> None:
    @ragtrace.pipeline
    def ask(query: str) -> str:
        ragtrace.attach_gold(["g"])
        ragtrace.attach_feedback(comment="user typed again")
        return "a"

    ask("q")
    spans = memory()
    root = next(s for s in spans if s.name.endswith("ask"))
    assert (root.attributes or {})[sc.GOLD_DOCUMENT_IDS] == ("g",)
    feedback = next(s for s in spans if s.name == "ragtrace.annotation.feedback")
    assert (feedback.attributes or {})[sc.ANNOTATES_TRACE_ID] == format(root.context.trace_id, "032x")


@pytest.mark.parametrize(("call", "kwargs"), [
    ("attach_gold", {"ids": ["d"], "trace_id": "not-hex"}),
    ("attach_gold", {"ids": ["d"]}),  # no target outside a query
    ("attach_feedback", {"score": 1.5, "query_id": "q"}),
    ("attach_feedback", {"score": float("nan"), "query_id": "q"}),
    ("attach_feedback", {"query_id": "q"}),  # nothing to say
])
def test_bad_annotations_return_false_and_never_raise(memory: Any, call: str, kwargs: dict[str, Any]) -> None:
    assert getattr(ragtrace, call)(**kwargs) is False
    assert memory() == []
