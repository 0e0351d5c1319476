"""LangChain, traced by OpenInference's real instrumentor, exporting through a stock OpenTelemetry SDK
over OTLP/HTTP to a real `ragtrace serve` on loopback: what ragtrace reads back is exactly what each
chain was given (pool, order, context, query, answer), with fixed documents and LangChain's own
fake chat model. No span here is hand-built."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from operator import itemgetter
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableLambda, RunnablePassthrough
from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ragtrace_store import TraceFilter
from ragtrace_store.assembly import ENV_QUERY_INPUT_KEYS
from ragtrace_store.traces import count_roots

from ._interop import GOOD, PASSAGES, QUERY, Collector, collector

# openinference-instrumentation-langchain calls a method langchain-core 1.x deprecates; not ours to fix
pytestmark = pytest.mark.filterwarnings("ignore::langchain_core._api.deprecation.LangChainDeprecationWarning")

NAMES = list(PASSAGES)  # the order the retriever returns them in


def documents(names: list[str]) -> list[Document]:
    # OpenInference does not export Document.id; metadata["id"] is how LangChain users name documents
    return [Document(page_content=PASSAGES.get(n, f"passage {n} about nothing in particular"), metadata={"id": n})
            for n in names]


class Fixed(BaseRetriever):
    """A retriever over fixed documents (the vector store is not what is tested)."""

    names: list[str]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return documents(self.names)


class Compress(BaseRetriever):
    """A compression retriever as langchain's ContextualCompressionRetriever is built: it calls its
    base retriever as a child run and keeps what its compressor keeps (here: the last three, reversed)."""

    base: BaseRetriever

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        found = self.base.invoke(query, config={"callbacks": run_manager.get_child()})
        return found[::-1][:3]


def pick(order: list[str]) -> Runnable[Any, Any]:
    """A reranker as a plain step (LangChain has no reranker span): keeps ``order``."""
    return RunnableLambda(lambda docs: [next(d for d in docs if d.metadata["id"] == n) for n in order], name="rerank")


def fmt(docs: list[Document]) -> str:
    return "\n\n".join(d.page_content for d in docs)


PROMPT = ChatPromptTemplate.from_messages([("system", "Answer only from these passages:\n\n{context}"),
                                           ("human", "{question}")])


def rag(retriever: Runnable[Any, Any], answer: str, order: list[str] | None = None) -> Runnable[Any, Any]:
    context = retriever | pick(order) | fmt if order is not None else retriever | fmt
    return ({"context": context, "question": RunnablePassthrough()} | PROMPT
            | FakeListChatModel(responses=[answer]) | StrOutputParser())


@pytest.fixture(scope="module")
def lc(chdb_store: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    with collector(chdb_store, tmp_path_factory.mktemp("langchain")) as c:
        yield c


def instrumented(c: Collector, release: str, *, max_attributes: int | None = None,
                 ) -> AbstractContextManager[tuple[TracerProvider, InMemorySpanExporter]]:
    return c.instrumented(LangChainInstrumentor(), "lc-rag", release, max_attributes=max_attributes)


def ids(docs: Any) -> list[str]:
    return [d.id for d in docs]


def test_lcel_retrieve_rerank_chat_reads_pool_order_context_and_answer(lc: Collector) -> None:
    with instrumented(lc, "lc-lcel") as (tp, seen):
        (tid,) = lc.traced(tp, seen, lambda: rag(Fixed(names=NAMES), GOOD, ["salt", "gold", "freeze"]).invoke(QUERY))
    rec = lc.record(tid)
    assert ids(rec.retrieved) == NAMES and [d.rank for d in rec.retrieved] == list(range(8))
    # no reranker span: the context is what the prompt contains, in prompt order (not all 8)
    assert ids(rec.context) == ["salt", "gold", "freeze"] and rec.context_source == "prompt"
    assert [d.content for d in rec.context] == [PASSAGES["salt"], PASSAGES["gold"], PASSAGES["freeze"]]
    # ... and the final order is the prompt's, then what was not shown, in retrieval order
    assert ids(rec.reranked) == ["salt", "gold", "freeze"] + [n for n in NAMES if n not in ("salt", "gold", "freeze")]
    assert (rec.query, rec.answer, rec.release, rec.service) == (QUERY, GOOD, "lc-lcel", "lc-rag")
    assert rec.complete and rec.incomplete_reasons == () and rec.is_query


def test_a_nested_compression_retriever_gives_the_base_pool_every_time(lc: Collector) -> None:
    chain = rag(Compress(base=Fixed(names=NAMES)), GOOD)
    with instrumented(lc, "lc-nested") as (tp, seen):
        # 20 runs, since the fault was intermittent (13 of 20 wrong): which retriever's list became the pool
        # depended on the spans' start times
        trace_ids = lc.traced(tp, seen, lambda: [chain.invoke(QUERY) for _ in range(20)])
    assert len(trace_ids) == 20
    compressed = NAMES[::-1][:3]
    for tid in trace_ids:
        rec = lc.record(tid)
        assert ids(rec.retrieved) == NAMES, "the pool is the base retriever's list"
        assert ids(rec.reranked) == compressed, "the compressor's list is the final order"
        assert ids(rec.context) == compressed and rec.context_source == "prompt"


class Scored(BaseRetriever):
    """A vector store's retriever as LangChain's return them with scores: each similarity in the
    document's metadata (``similarity_search_with_relevance_scores`` callers put it there), the last
    document without one."""

    names: list[str]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        docs = documents(self.names)
        for i, d in enumerate(docs[:-1]):
            d.metadata["score"] = round(0.9 - i / 20, 2)
        return docs


def test_document_scores_are_read_from_their_metadata(lc: Collector) -> None:
    with instrumented(lc, "lc-scores") as (tp, seen):
        (tid,) = lc.traced(tp, seen, lambda: rag(Scored(names=NAMES), GOOD).invoke(QUERY))
    rec = lc.record(tid)
    assert ids(rec.retrieved) == NAMES
    assert [d.score for d in rec.retrieved] == [round(0.9 - i / 20, 2) for i in range(len(NAMES) - 1)] + [None]


def test_a_prompt_cut_by_the_sdks_value_length_limit_is_incomplete_and_the_sender_told(lc: Collector) -> None:
    """The stock SDK's OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT (300 here) cuts the system message, which holds
    the passages, inside the fifth one: read as whole, the context would be the four before it."""
    limit = 300
    system = PROMPT.format_messages(context=fmt(documents(NAMES)), question=QUERY)[0].content
    start = system.index(PASSAGES[NAMES[4]])
    assert start + 8 <= limit < start + len(PASSAGES[NAMES[4]])  # the cut falls inside the fifth passage
    with lc.instrumented(LangChainInstrumentor(), "lc-rag", "lc-cut", max_value_length=limit) as (tp, seen):
        (tid,) = lc.traced(tp, seen, lambda: rag(Fixed(names=NAMES), GOOD).invoke(QUERY))
        told = lc.resend(seen)
    rec = lc.record(tid)
    assert ids(rec.context) == NAMES[:4]  # what the cut prompt shows
    assert not rec.complete and any(
        r.startswith("cut_value: span") and "llm.input_messages.0.message.content" in r and f"'{NAMES[4]}'" in r
        and "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT" in r for r in rec.incomplete_reasons), rec.incomplete_reasons
    assert f"llm.input_messages.0.message.content of span 'FakeListChatModel' has {limit} characters" in told, told
    assert "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT" in told
    # the same chain under a limit above its longest value reads complete, all eight passages shown
    with lc.instrumented(LangChainInstrumentor(), "lc-rag", "lc-uncut", max_value_length=4000) as (tp, seen):
        (tid,) = lc.traced(tp, seen, lambda: rag(Fixed(names=NAMES), GOOD).invoke(QUERY))
    rec = lc.record(tid)
    assert rec.complete and ids(rec.context) == NAMES


def test_a_multi_key_input_gives_the_query_not_its_json(lc: Collector, monkeypatch: pytest.MonkeyPatch) -> None:
    retriever = Fixed(names=NAMES)
    plain = ({"context": itemgetter("question") | retriever | fmt, "question": itemgetter("question")} | PROMPT
             | FakeListChatModel(responses=[GOOD]) | StrOutputParser())
    rewritten = ({"context": itemgetter("question") | RunnableLambda(lambda q: f"rewritten: {q}") | retriever | fmt,
                  "question": itemgetter("question")} | PROMPT | FakeListChatModel(responses=[GOOD])
                 | StrOutputParser())
    given = {"question": QUERY, "user": "bob"}
    with instrumented(lc, "lc-keys") as (tp, seen):
        (a,) = lc.traced(tp, seen, lambda: plain.invoke(given))
        (b,) = lc.traced(tp, seen, lambda: rewritten.invoke(given))
    assert lc.record(a).query == QUERY  # the retriever's input
    assert lc.record(b).query == f"rewritten: {QUERY}"  # the retriever saw the rewrite ...
    monkeypatch.setenv(ENV_QUERY_INPUT_KEYS, "question")
    assert lc.record(b).query == QUERY  # ... and a configured input key names the user's question
    assert ids(lc.record(a).retrieved) == NAMES and ids(lc.record(a).context) == NAMES


def test_stream_gives_the_whole_answer(lc: Collector) -> None:
    chain = rag(Fixed(names=NAMES), GOOD, ["gold", "ocean"])
    chunks: list[str] = []
    with instrumented(lc, "lc-stream") as (tp, seen):
        (tid,) = lc.traced(tp, seen, lambda: chunks.extend(chain.stream(QUERY)))
    assert len(chunks) > 1 and "".join(chunks) == GOOD
    rec = lc.record(tid)
    assert rec.answer == GOOD and ids(rec.context) == ["gold", "ocean"]


def test_query_ids_from_metadata_join_imported_gold(lc: Collector) -> None:
    chain = rag(Fixed(names=NAMES), GOOD, ["gold"])
    with instrumented(lc, "lc-qid") as (tp, seen):
        (tid,) = lc.traced(tp, seen, lambda: chain.invoke(QUERY, config={"metadata": {"query_id": "lc-q-1"}}))
    lc.store.insert("gold", [(lc.tenant, "lc-q-1", "", "gold", 1, "qrels", datetime.now(UTC))],
                    ["tenant", "query_id", "trace_id", "doc_id", "relevance", "source", "added_at"])
    rec = lc.record(tid)
    assert rec.query_id == "lc-q-1" and rec.gold_ids == ("gold",)


def test_a_retriever_called_outside_a_chain_is_not_a_query(lc: Collector) -> None:
    with instrumented(lc, "lc-stray") as (tp, seen):
        (tid,) = lc.traced(tp, seen, lambda: Fixed(names=NAMES).invoke(QUERY))
        (chat,) = lc.traced(tp, seen, lambda: FakeListChatModel(responses=["hi"]).invoke("hello"))
    assert list(lc.store.read_traces(tenant=lc.tenant, trace_ids=[tid, chat])) == []
    everything = {r.trace_id: r for r in lc.store.read_traces(tenant=lc.tenant, trace_ids=[tid, chat],
                                                               include_all=True)}
    assert set(everything) == {tid, chat} and not any(r.is_query for r in everything.values())
    assert count_roots(lc.store, TraceFilter(tenant=lc.tenant, release="lc-stray")) == {"queries": 0, "other": 2}


def test_100_candidates_through_a_stock_sdk_are_incomplete_and_intact_with_the_limit_raised(lc: Collector) -> None:
    many = [f"c{i:03d}" for i in range(100)]
    chain = rag(Fixed(names=many), GOOD, many[:3])
    with instrumented(lc, "lc-100") as (tp, seen):  # the SDK's default: 128 attributes per span
        (stock,) = lc.traced(tp, seen, lambda: chain.invoke(QUERY))
    with instrumented(lc, "lc-100", max_attributes=1024) as (tp, seen):  # OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT=1024
        (raised,) = lc.traced(tp, seen, lambda: chain.invoke(QUERY))
    rec = lc.record(stock)
    assert not rec.complete and len(rec.retrieved) < 100
    assert any(r.startswith("dropped_attributes: span 'Fixed' (RETRIEVER) lost") for r in rec.incomplete_reasons)
    assert any(r.startswith("document_holes: span 'Fixed'") for r in rec.incomplete_reasons)
    rec = lc.record(raised)
    assert rec.complete and rec.incomplete_reasons == ()
    assert ids(rec.retrieved) == many and ids(rec.context) == many[:3]


ABSTAIN = "I cannot answer this from the provided documents."
#: planted faults: (what the retriever returns, what the rerank step keeps, the answer) -> mode
FAULTS = {
    "ok": (NAMES, ["gold", "salt", "freeze"], GOOD),
    "rank_inversion": (NAMES, ["salt", "freeze", "everest"], "Salt water boils at a slightly higher temperature."),
    "retrieval_gap": ([n for n in NAMES if n != "gold"], ["salt", "everest"], "It boils at about 70 degrees."),
    "under_use": (NAMES, ["gold", "salt"], ABSTAIN),
    "fabrication": (NAMES, ["gold", "salt"], "Water boils at 90 degrees Celsius at sea level."),
}


def test_the_audit_finds_each_planted_fault_and_reports_incomplete_traces_apart(lc: Collector,
                                                                               tmp_path: Any) -> None:
    from ragtrace_evaluator.audit.run import run_audit

    with instrumented(lc, "lc-audit") as (tp, seen):
        for mode, (names, order, answer) in FAULTS.items():
            chain = rag(Fixed(names=names), answer, order)
            lc.traced(tp, seen, lambda c=chain, m=mode: c.invoke(QUERY, config={"metadata": {"query_id": f"lc-{m}"}}))
    with instrumented(lc, "lc-audit") as (tp, seen):  # and one that lost attributes on the way
        many = [*NAMES, *(f"c{i:03d}" for i in range(92))]
        chain = rag(Fixed(names=many), GOOD, ["gold"])
        lc.traced(tp, seen, lambda: chain.invoke(QUERY, config={"metadata": {"query_id": "lc-lost"}}))
    now = datetime.now(UTC)
    lc.store.insert("gold", [(lc.tenant, f"lc-{m}", "", "gold", 1, "qrels", now) for m in [*FAULTS, "lost"]],
                    ["tenant", "query_id", "trace_id", "doc_id", "relevance", "source", "added_at"])
    report = run_audit(lc.store, tenant=lc.tenant, release="lc-audit", labeller="offline", relevance_labeller=None,
                       per_trace=tmp_path / "labels.jsonl", return_records=True)
    got = {r["query_id"]: r for r in report["records"]}
    assert {q: r["failure_mode"] for q, r in got.items()} == {**{f"lc-{m}": m for m in FAULTS},
                                                             "lc-lost": "incomplete"}
    lost = got["lc-lost"]
    assert lost["incomplete_reasons"] and lost["gold_in_pool"] is None and lost["generation"] is None
    assert report["incomplete"]["count"] == 1 and report["incomplete"]["trace_ids"] == [lost["trace_id"]]
    assert set(report["incomplete"]["reasons"]) >= {"dropped_attributes"}
    assert report["failure_modes"]["ok"]["n"] == len(FAULTS)  # the modes are over the complete traces
