"""Decorators: exact attributes per stage, ranks, context order, streams, async, errors, no-op."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from opentelemetry.trace import SpanKind, StatusCode

import ragtrace
from ragtrace import semconv as sc

from .util import FULL, ROOT, by_name, doc_attrs, docs

CANDIDATES = docs(6)


@ragtrace.retriever
def retrieve(query: str, k: int = 6) -> list[dict[str, Any]]:
    return CANDIDATES[:k]


@ragtrace.reranker(model="cross-encoder-x")
def rerank(query: str, documents: list[dict[str, Any]], top_k: int = 3) -> list[dict[str, Any]]:
    # reverse order: the last candidate becomes first
    return list(reversed(documents))[:top_k]


@ragtrace.generator(model="smol")
def generate(prompt: str, context: list[dict[str, Any]]) -> str:
    return "answer from " + ",".join(d["id"] for d in context)


@ragtrace.pipeline
def answer(query: str, query_id: str | None = None, gold_ids: list[str] | None = None) -> str:
    found = retrieve(query)
    top = rerank(query, found, top_k=3)
    return generate(query, top)


def test_every_stage_exact_attributes(memory: Any) -> None:
    result = answer("who won?", query_id="q-1", gold_ids=["d5", "d2"])
    assert result == "answer from d5,d4,d3"
    spans = by_name(memory())
    root, ret, rr, gen = spans["answer"], spans["retrieve"], spans["rerank"], spans["generate"]

    assert dict(root.attributes or {}) == {
        sc.SPAN_KIND: "CHAIN", sc.INPUT_VALUE: "who won?", sc.OUTPUT_VALUE: "answer from d5,d4,d3",
        sc.QUERY_ID: "q-1", sc.GOLD_DOCUMENT_IDS: ("d5", "d2"), **ROOT,
    }
    assert dict(ret.attributes or {}) == {
        sc.SPAN_KIND: "RETRIEVER", sc.INPUT_VALUE: "who won?", **doc_attrs(sc.RETRIEVAL_DOCUMENTS, CANDIDATES),
        **FULL,
    }
    reranked = list(reversed(CANDIDATES))[:3]
    assert dict(rr.attributes or {}) == {
        sc.SPAN_KIND: "RERANKER", sc.RERANKER_QUERY: "who won?", sc.RERANKER_TOP_K: 3,
        sc.RERANKER_MODEL_NAME: "cross-encoder-x",
        **doc_attrs(sc.RERANKER_INPUT_DOCUMENTS, CANDIDATES),
        **doc_attrs(sc.RERANKER_OUTPUT_DOCUMENTS, reranked), **FULL,
    }
    assert dict(gen.attributes or {}) == {
        sc.SPAN_KIND: "LLM", sc.INPUT_VALUE: "who won?", sc.OUTPUT_VALUE: "answer from d5,d4,d3",
        sc.LLM_MODEL_NAME: "smol", **doc_attrs(sc.CONTEXT_DOCUMENTS, reranked), **FULL,
    }
    # one trace, children under the root, root has no parent
    assert {s.context.trace_id for s in spans.values()} == {root.context.trace_id}
    assert root.parent is None
    for child in (ret, rr, gen):
        assert child.parent is not None and child.parent.span_id == root.context.span_id
    assert all(s.kind == SpanKind.INTERNAL for s in spans.values())
    assert root.start_time <= ret.start_time <= ret.end_time <= rr.start_time <= gen.end_time <= root.end_time
    assert root.resource.attributes[sc.SERVICE_NAME] == "svc"


def test_ranks_before_and_after_rerank(memory: Any) -> None:
    answer("q")
    spans = by_name(memory())
    rr = spans["rerank"].attributes or {}
    before = [rr[f"{sc.RERANKER_INPUT_DOCUMENTS}.{i}.{sc.DOCUMENT_ID}"] for i in range(6)]
    after = [rr[f"{sc.RERANKER_OUTPUT_DOCUMENTS}.{i}.{sc.DOCUMENT_ID}"] for i in range(3)]
    assert before == ["d0", "d1", "d2", "d3", "d4", "d5"]
    assert after == ["d5", "d4", "d3"]
    assert f"{sc.RERANKER_OUTPUT_DOCUMENTS}.3.{sc.DOCUMENT_ID}" not in rr


def test_many_documents_are_not_dropped_by_attribute_limits(memory: Any) -> None:
    many = docs(60)

    @ragtrace.reranker
    def big_rerank(query: str, documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return documents[::-1]

    big_rerank("q", many)
    (span,) = memory()
    attrs = span.attributes or {}
    # kind, mode, query, top_k, 2 lists x 60 x (id, score, content, hash)
    assert len(attrs) == 4 + 2 * 60 * 4
    assert attrs[f"{sc.RERANKER_OUTPUT_DOCUMENTS}.59.{sc.DOCUMENT_ID}"] == "d0"


def test_context_order_is_exactly_as_supplied(memory: Any) -> None:
    ctx = [{"id": "z", "text": "zz"}, {"id": "a", "text": "aa"}, {"id": "m", "text": "mm"}]
    generate("p", ctx)
    (span,) = memory()
    attrs = span.attributes or {}
    assert [attrs[f"{sc.CONTEXT_DOCUMENTS}.{i}.{sc.DOCUMENT_ID}"] for i in range(3)] == ["z", "a", "m"]
    assert [attrs[f"{sc.CONTEXT_DOCUMENTS}.{i}.{sc.DOCUMENT_CONTENT}"] for i in range(3)] == ["zz", "aa", "mm"]


def test_context_as_keyword_and_mutation_after_call_does_not_reorder(memory: Any) -> None:
    ctx = [{"id": "x", "text": "1"}, {"id": "y", "text": "2"}]
    generate(prompt="p", context=ctx)
    ctx.reverse()  # the service reuses its list: the span keeps what was supplied
    (span,) = memory()
    attrs = span.attributes or {}
    assert attrs[f"{sc.CONTEXT_DOCUMENTS}.0.{sc.DOCUMENT_ID}"] == "x"
    assert attrs[sc.INPUT_VALUE] == "p"


def test_without_and_with_parentheses_and_custom_name(memory: Any) -> None:
    @ragtrace.retriever()
    def r1(query: str) -> list[str]:
        return ["plain text doc"]

    @ragtrace.retriever(name="vector-search")
    def r2(query: str) -> list[str]:
        return []

    r1("a")
    r2("b")
    spans = by_name(memory())
    assert set(spans) == {"r1", "vector-search"}
    assert next(s.name for s in memory()) == "test_without_and_with_parentheses_and_custom_name.<locals>.r1"


def test_methods_skip_self_for_positions(memory: Any) -> None:
    class Service:
        @ragtrace.reranker
        def rerank(self, query: str, documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return documents[:1]

    Service().rerank("q", docs(3))
    (span,) = memory()
    attrs = span.attributes or {}
    assert attrs[f"{sc.RERANKER_INPUT_DOCUMENTS}.2.{sc.DOCUMENT_ID}"] == "d2"
    assert attrs[sc.RERANKER_TOP_K] == 1


def test_streamed_answer_is_concatenation_of_chunks(memory: Any) -> None:
    @ragtrace.generator
    def stream(prompt: str, context: list[dict[str, Any]]) -> Iterator[str]:
        yield "Paris "
        yield "is "
        yield "the capital."

    @ragtrace.pipeline
    def ask(query: str) -> Iterator[str]:
        return stream(query, docs(2))  # a returned stream keeps the root open

    gen = ask("capital?")
    assert inspect.isgenerator(gen)
    assert "".join(gen) == "Paris is the capital."
    spans = by_name(memory())
    for name in ("ask", "stream"):
        attrs = spans[name].attributes or {}
        assert attrs[sc.OUTPUT_VALUE] == "Paris is the capital."
        assert attrs[sc.ANSWER_STREAMED] is True
        assert sc.STREAM_CLOSED_EARLY not in attrs
    assert spans["stream"].parent is not None
    assert spans["stream"].parent.span_id == spans["ask"].context.span_id
    assert spans["ask"].end_time >= spans["stream"].end_time


def test_stream_closed_early_records_chunks_so_far(memory: Any) -> None:
    finally_ran = []

    @ragtrace.generator
    def stream(prompt: str, context: list[Any]) -> Iterator[str]:
        try:
            yield from ["a", "b", "c", "d"]
        finally:
            finally_ran.append(True)

    gen = stream("p", [])
    assert next(gen) == "a"
    assert next(gen) == "b"
    gen.close()
    assert finally_ran == [True]  # the inner generator was closed too
    (span,) = memory()
    attrs = span.attributes or {}
    assert attrs[sc.OUTPUT_VALUE] == "ab"
    assert attrs[sc.STREAM_CLOSED_EARLY] is True
    assert span.status.status_code == StatusCode.UNSET
    assert inspect.isgeneratorfunction(stream)


def test_generator_function_retriever_records_yielded_documents(memory: Any) -> None:
    @ragtrace.retriever
    def scan(query: str) -> Iterator[dict[str, Any]]:
        yield from docs(3)

    assert [d["id"] for d in scan("q")] == ["d0", "d1", "d2"]
    (span,) = memory()
    assert dict(span.attributes or {}) == {
        sc.SPAN_KIND: "RETRIEVER", sc.INPUT_VALUE: "q", **doc_attrs(sc.RETRIEVAL_DOCUMENTS, docs(3)), **FULL}


def test_async_functions_and_async_generators(memory: Any) -> None:
    @ragtrace.retriever
    async def aretrieve(query: str) -> list[dict[str, Any]]:
        await asyncio.sleep(0)
        return docs(2)

    @ragtrace.generator
    async def astream(prompt: str, context: list[dict[str, Any]]) -> AsyncIterator[str]:
        for chunk in ("x", "y", "z"):
            await asyncio.sleep(0)
            yield chunk

    @ragtrace.pipeline
    async def apipeline(query: str) -> str:
        found = await aretrieve(query)
        return "".join([c async for c in astream(query, found)])

    assert inspect.iscoroutinefunction(apipeline) and inspect.isasyncgenfunction(astream)

    async def main() -> list[str]:
        # two concurrent queries must not mix their spans
        return list(await asyncio.gather(apipeline("one"), apipeline("two")))

    assert asyncio.run(main()) == ["xyz", "xyz"]
    spans = memory()
    roots = [s for s in spans if s.name.endswith(".apipeline")]
    assert len(roots) == 2 and len(spans) == 6
    for root in roots:
        children = [s for s in spans if s.parent is not None and s.parent.span_id == root.context.span_id]
        assert len(children) == 2
        query = (root.attributes or {})[sc.INPUT_VALUE]
        assert {(c.attributes or {}).get(sc.INPUT_VALUE) for c in children} == {query}
        assert all(c.context.trace_id == root.context.trace_id for c in children)
        assert (root.attributes or {})[sc.OUTPUT_VALUE] == "xyz"


def test_user_exception_reraised_unchanged_and_span_marked(memory: Any) -> None:
    class Boom(RuntimeError):
        pass

    original = Boom("index offline")

    @ragtrace.retriever
    def broken(query: str) -> list[Any]:
        raise original

    @ragtrace.pipeline
    def ask(query: str) -> str:
        broken(query)
        return "never"

    with pytest.raises(Boom) as info:
        ask("q")
    assert info.value is original
    spans = by_name(memory())
    for name in ("broken", "ask"):
        span = spans[name]
        assert span.status.status_code == StatusCode.ERROR
        assert span.status.description == "Boom: index offline"
        (event,) = span.events
        assert event.name == sc.EXCEPTION_EVENT
        attrs = event.attributes or {}
        assert str(attrs[sc.EXCEPTION_TYPE]).endswith("Boom")
        assert attrs[sc.EXCEPTION_MESSAGE] == "index offline"
        assert "raise original" in str(attrs[sc.EXCEPTION_STACKTRACE])
    assert ragtrace.current_trace_id() is None  # context restored after the error


def test_a_recursion_error_through_nested_pipelines_records_a_bounded_stack(receiver: Any) -> None:
    from .receiver import span_attributes

    @ragtrace.pipeline
    def step(query: str, depth: int = 0) -> str:
        return step(query, depth + 1)  # a user's unbounded recursion

    ragtrace.configure(endpoint=receiver.url, schedule_delay_ms=60_000)
    with pytest.raises(RecursionError):
        step("q")
    assert ragtrace.force_flush(60)
    stats = ragtrace.stats()
    assert stats.dropped_export_failed == 0 and stats.spans_exported > 200
    got = receiver.wait_for_spans(stats.spans_exported)
    stacks = [str(span_attributes(e)[sc.EXCEPTION_STACKTRACE]) for _, s in got for e in s.events]
    assert len(stacks) == stats.spans_exported  # every span of the recursion is marked with the error
    # before: every span carried all ~1000 frames (about 127 kB each, 63 MB for the trace, 22 s of the
    # export thread holding the GIL); the innermost 64 frames of each chained traceback are kept
    blocks = [b for stack in stacks for b in stack.split("Traceback (most recent call last):")]
    assert max(b.count('\n  File "') for b in blocks) <= 64  # ragtrace._flatten.MAX_STACK_FRAMES
    assert all(stack.splitlines()[-1].startswith("RecursionError: maximum recursion depth") for stack in stacks)


def test_exception_inside_stream_marks_span(memory: Any) -> None:
    @ragtrace.generator
    def stream(prompt: str, context: list[Any]) -> Iterator[str]:
        yield "partial"
        raise ValueError("model crashed")

    with pytest.raises(ValueError, match="model crashed"):
        list(stream("p", []))
    (span,) = memory()
    assert span.status.status_code == StatusCode.ERROR
    assert (span.attributes or {})[sc.OUTPUT_VALUE] == "partial"


def test_unconfigured_is_a_pass_through() -> None:
    calls = []

    @ragtrace.pipeline
    def ask(query: str) -> dict[str, str]:
        calls.append(query)
        return {"answer": "ok"}

    before = ragtrace.stats()  # an earlier test's stopped configuration, if any (stats survive shutdown)
    result = ask("q")
    assert result == {"answer": "ok"} and calls == ["q"]
    assert ragtrace.current_trace_id() is None
    assert ragtrace.stats() == before and before.spans_queued == 0
    assert ragtrace.set_query_id("x") is False
    assert ragtrace.attach_gold(["d"], query_id="q") is False
    assert ask.__name__ == "ask" and ask.__wrapped__ is not None  # type: ignore[attr-defined]


def test_answer_shapes_dict_and_set_query_id(memory: Any) -> None:
    @ragtrace.pipeline
    def ask(question: str) -> dict[str, Any]:
        ragtrace.set_query_id("qid-7")
        ragtrace.set_gold_ids(["g1"])
        ragtrace.set_attribute("app.tenant", "acme")
        return {"answer": "forty-two", "ids": ["d1"]}

    ask(question="meaning?")
    (span,) = memory()
    attrs = span.attributes or {}
    assert attrs[sc.INPUT_VALUE] == "meaning?"
    assert attrs[sc.OUTPUT_VALUE] == "forty-two"
    assert attrs[sc.QUERY_ID] == "qid-7"
    assert attrs[sc.GOLD_DOCUMENT_IDS] == ("g1",)
    assert attrs["app.tenant"] == "acme"


def test_current_trace_id_inside_and_outside(memory: Any) -> None:
    seen: list[str | None] = []

    @ragtrace.pipeline
    def ask(query: str) -> str:
        seen.append(ragtrace.current_trace_id())
        return "a"

    ask("q")
    assert ragtrace.current_trace_id() is None
    (span,) = memory()
    assert seen == [format(span.context.trace_id, "032x")]


def test_nested_pipeline_is_a_sub_step_not_a_second_root(memory: Any) -> None:
    @ragtrace.pipeline
    def rewrite(query: str) -> str:
        return query + " (rewritten)"

    @ragtrace.pipeline
    def outer(query: str) -> str:
        return "answer to " + rewrite(query)

    outer("q")
    spans = by_name(memory())
    assert (spans["outer"].attributes or {})[sc.SDK_VERSION] == ragtrace.__version__
    assert sc.SDK_VERSION not in (spans["rewrite"].attributes or {})
    assert (spans["outer"].attributes or {})[sc.OUTPUT_VALUE] == "answer to q (rewritten)"


def test_async_error_and_async_stream_closed_early(memory: Any) -> None:
    closed = []

    @ragtrace.retriever
    async def failing(query: str) -> list[Any]:
        await asyncio.sleep(0)
        raise TimeoutError("vector db timeout")

    @ragtrace.generator
    async def chunks(prompt: str, context: list[Any]) -> AsyncIterator[str]:
        try:
            for word in ("one ", "two ", "three"):
                yield word
        finally:
            closed.append(True)

    async def main() -> str:
        with pytest.raises(TimeoutError):
            await failing("q")
        agen = chunks("p", [])
        first = await agen.__anext__()
        await agen.aclose()
        return first

    assert asyncio.run(main()) == "one "
    assert closed == [True]
    spans = by_name(memory())
    assert spans["failing"].status.status_code == StatusCode.ERROR
    attrs = spans["chunks"].attributes or {}
    assert attrs[sc.OUTPUT_VALUE] == "one " and attrs[sc.STREAM_CLOSED_EARLY] is True


def test_concurrent_threads_keep_their_queries_apart(memory: Any) -> None:
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda i: answer(f"question {i}"), range(40)))
    assert len(results) == 40
    spans = memory()
    assert len(spans) == 160
    roots = {s.context.span_id: s for s in spans if s.parent is None}
    assert len(roots) == 40
    for span in spans:
        if span.parent is not None:
            root = roots[span.parent.span_id]
            assert span.context.trace_id == root.context.trace_id
            query = (root.attributes or {})[sc.INPUT_VALUE]
            own = (span.attributes or {}).get(sc.INPUT_VALUE) or (span.attributes or {}).get(sc.RERANKER_QUERY)
            assert own == query
