"""LlamaIndex, traced by OpenInference's real instrumentor, exporting through a stock OpenTelemetry SDK
over OTLP/HTTP to a real `ragtrace serve` on loopback: a node postprocessor that reports its rerank
(a RERANKER span), one that reports it only to the legacy callbacks (no RERANKER span), and
``streaming=True``. Fixed documents; no span here is hand-built."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.base.response.schema import StreamingResponse
from llama_index.core.callbacks import CBEventType, EventPayload
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.instrumentation.events.rerank import ReRankEndEvent, ReRankStartEvent
from llama_index.core.llms import CompletionResponse, CompletionResponseGen, CustomLLM, LLMMetadata
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index_instrumentation import get_dispatcher  # what llama_index.core.instrumentation re-exports
from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ragtrace_store import TraceFilter
from ragtrace_store.traces import count_roots

from ._interop import GOOD, PASSAGES, QUERY, Collector, collector

# the instrumentor calls a pydantic method pydantic 2 deprecates; not ours to fix
pytestmark = pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince20")

NAMES = list(PASSAGES)
dispatcher = get_dispatcher(__name__)


class Scripted(CustomLLM):
    """A fake LLM with a fixed answer. Not llama-index's MockLLM: its stream's cumulative ``text``
    lags its deltas by one token, so the instrumentor records a shorter answer than the user got,
    which no real LLM does."""

    answer: str = GOOD

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="scripted")

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=self.answer)

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        def tokens() -> CompletionResponseGen:
            text = ""
            for word in self.answer.split(" "):
                delta = f" {word}" if text else word
                text += delta
                yield CompletionResponse(text=text, delta=delta)

        return tokens()


class Fixed(BaseRetriever):
    """A retriever over fixed nodes (ids as the user gave them), scores falling with rank."""

    def __init__(self, names: Sequence[str]) -> None:
        super().__init__()
        self.names = list(names)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [NodeWithScore(node=TextNode(id_=n, text=PASSAGES.get(n, f"passage {n} about nothing")),
                              score=round(1 - i / 100, 4)) for i, n in enumerate(self.names)]


def _keep(nodes: list[NodeWithScore], order: Sequence[str]) -> list[NodeWithScore]:
    return [next(n for n in nodes if n.node.node_id == name) for name in order]


class EventRerank(BaseNodePostprocessor):
    """A reranker that reports itself as llama-index's own rerankers do (ReRankStart/EndEvent):
    the instrumentor makes its span a RERANKER with input and output documents."""

    order: list[str]

    def _postprocess_nodes(self, nodes: list[NodeWithScore],
                           query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        dispatcher.event(ReRankStartEvent(query=query_bundle, nodes=nodes, top_n=len(self.order), model_name="fixed"))
        out = _keep(nodes, self.order)
        dispatcher.event(ReRankEndEvent(nodes=out))
        return out


class CallbackRerank(BaseNodePostprocessor):
    """A reranker written against the legacy callback manager only: its span is a plain CHAIN."""

    order: list[str]

    def _postprocess_nodes(self, nodes: list[NodeWithScore],
                           query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        with self.callback_manager.event(CBEventType.RERANKING, payload={EventPayload.NODES: nodes}) as event:
            out = _keep(nodes, self.order)
            event.on_end(payload={EventPayload.NODES: out})
        return out


def engine(reranker: BaseNodePostprocessor, *, names: Sequence[str] = NAMES, answer: str = GOOD,
           streaming: bool = False) -> RetrieverQueryEngine:
    return RetrieverQueryEngine.from_args(Fixed(names), llm=Scripted(answer=answer), node_postprocessors=[reranker],
                                          streaming=streaming)


@pytest.fixture(scope="module")
def li(chdb_store: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    with collector(chdb_store, tmp_path_factory.mktemp("llamaindex")) as c:
        yield c


def instrumented(c: Collector, release: str, *, max_attributes: int | None = None,
                 ) -> AbstractContextManager[tuple[TracerProvider, InMemorySpanExporter]]:
    return c.instrumented(LlamaIndexInstrumentor(), "li-rag", release, max_attributes=max_attributes)


def ids(docs: Any) -> list[str]:
    return [d.id for d in docs]


def test_a_node_postprocessor_reranker(li: Collector) -> None:
    order = ["salt", "gold", "freeze"]
    with instrumented(li, "li-event") as (tp, seen):
        (tid,) = li.traced(tp, seen, lambda: engine(EventRerank(order=order)).query(QUERY))
    rec = li.record(tid)
    assert ids(rec.retrieved) == NAMES and [d.score for d in rec.retrieved] == [round(1 - i / 100, 4) for i in range(8)]
    assert ids(rec.reranked) == order
    assert ids(rec.context) == order and rec.context_source == "prompt"
    assert [d.content for d in rec.context] == [PASSAGES[n] for n in order]
    assert (rec.query, rec.answer) == (QUERY, GOOD) and rec.complete


def test_a_callback_style_reranker_leaves_the_context_in_the_prompt(li: Collector) -> None:
    order = ["ocean", "gold"]
    with instrumented(li, "li-callback") as (tp, seen):
        (tid,) = li.traced(tp, seen, lambda: engine(CallbackRerank(order=order)).query(QUERY))
    rec = li.record(tid)
    # no RERANKER span: the generator was shown 2 of the 8, not all of them
    assert ids(rec.retrieved) == NAMES
    assert ids(rec.context) == order and rec.context_source == "prompt"
    assert ids(rec.reranked) == [*order, *(n for n in NAMES if n not in order)]
    assert rec.answer == GOOD and rec.complete


def test_a_prompt_cut_by_the_sdks_value_length_limit_is_incomplete_and_the_sender_told(li: Collector) -> None:
    """The stock SDK's OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT (300 here) cuts the prompt inside the fifth of the
    eight passages it shows: read as whole, the context would be the four before it."""
    from llama_index.core.prompts.default_prompts import DEFAULT_TEXT_QA_PROMPT_TMPL

    limit = 300
    prompt = DEFAULT_TEXT_QA_PROMPT_TMPL.format(context_str="\n\n".join(PASSAGES[n] for n in NAMES), query_str=QUERY)
    start = prompt.index(PASSAGES[NAMES[4]])
    assert start + 8 <= limit < start + len(PASSAGES[NAMES[4]])  # the cut falls inside the fifth passage
    with li.instrumented(LlamaIndexInstrumentor(), "li-rag", "li-cut", max_value_length=limit) as (tp, seen):
        (tid,) = li.traced(tp, seen, lambda: engine(EventRerank(order=NAMES)).query(QUERY))
        told = li.resend(seen)
    rec = li.record(tid)
    assert ids(rec.context) == NAMES[:4]  # what the cut prompt shows
    assert not rec.complete and any(
        r.startswith("cut_value: span") and f"'{NAMES[4]}'" in r and "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT" in r
        for r in rec.incomplete_reasons), rec.incomplete_reasons
    assert f"has {limit} characters, a round number" in told and "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT" in told, told
    with li.instrumented(LlamaIndexInstrumentor(), "li-rag", "li-uncut", max_value_length=4000) as (tp, seen):
        (tid,) = li.traced(tp, seen, lambda: engine(EventRerank(order=NAMES)).query(QUERY))
    rec = li.record(tid)
    assert rec.complete and ids(rec.context) == NAMES


def test_streaming_gives_the_generated_answer_not_the_generator(li: Collector) -> None:
    got: list[str] = []

    def run() -> None:
        response = engine(EventRerank(order=["gold", "salt"]), streaming=True).query(QUERY)
        assert isinstance(response, StreamingResponse)
        got.append("".join(response.response_gen))

    with instrumented(li, "li-stream") as (tp, seen):
        (tid,) = li.traced(tp, seen, run)
    assert got == [GOOD]
    rec = li.record(tid)
    assert rec.answer == GOOD and ids(rec.context) == ["gold", "salt"] and rec.complete


def test_building_an_index_is_not_a_query(li: Collector) -> None:
    docs = [Document(text=PASSAGES[n], id_=n) for n in NAMES]
    embed = MockEmbedding(embed_dim=8)
    with instrumented(li, "li-index") as (tp, seen):
        built = li.traced(tp, seen, lambda: VectorStoreIndex.from_documents(docs, embed_model=embed))
    assert built, "building the index made traces"
    assert list(li.store.read_traces(tenant=li.tenant, trace_ids=built)) == []
    other = list(li.store.read_traces(tenant=li.tenant, trace_ids=built, include_all=True))
    assert other and {r.trace_id for r in other} <= set(built) and not any(r.is_query for r in other)
    assert count_roots(li.store, TraceFilter(tenant=li.tenant, release="li-index")) == {"queries": 0,
                                                                                        "other": len(other)}


def test_100_candidates_through_a_stock_sdk_are_incomplete_and_intact_with_the_limit_raised(li: Collector) -> None:
    many = [f"c{i:03d}" for i in range(100)]
    with instrumented(li, "li-100") as (tp, seen):
        (stock,) = li.traced(tp, seen, lambda: engine(EventRerank(order=many[:3]), names=many).query(QUERY))
    with instrumented(li, "li-100", max_attributes=2048) as (tp, seen):
        (raised,) = li.traced(tp, seen, lambda: engine(EventRerank(order=many[:3]), names=many).query(QUERY))
    rec = li.record(stock)
    assert not rec.complete and any(r.startswith("dropped_attributes: ") for r in rec.incomplete_reasons)
    rec = li.record(raised)
    assert rec.complete and ids(rec.retrieved) == many and ids(rec.reranked) == many[:3]
    assert ids(rec.context) == many[:3]


ABSTAIN = "I cannot answer this from the provided documents."
#: planted faults: (what the retriever returns, what the reranker keeps, the answer) -> mode
FAULTS = {
    "ok": (NAMES, ["gold", "salt"], GOOD),
    "rank_inversion": (NAMES, ["salt", "everest"], "Salt water boils at a slightly higher temperature."),
    "retrieval_gap": ([n for n in NAMES if n != "gold"], ["everest", "salt"], "It boils at about 70 degrees."),
    "under_use": (NAMES, ["gold", "freeze"], ABSTAIN),
    "fabrication": (NAMES, ["gold", "freeze"], "Water boils at 90 degrees Celsius at sea level."),
}


def test_the_audit_finds_each_planted_fault_with_query_ids_from_metadata(li: Collector, tmp_path: Any) -> None:
    from datetime import UTC, datetime

    from openinference.instrumentation import using_metadata

    from ragtrace_evaluator.audit.run import run_audit

    def run(mode: str, names: list[str], order: list[str], answer: str) -> None:
        with using_metadata({"query_id": f"li-{mode}"}):  # OpenInference's way to tag a trace
            engine(EventRerank(order=order), names=names, answer=answer).query(QUERY)

    with instrumented(li, "li-audit") as (tp, seen):
        for mode, (names, order, answer) in FAULTS.items():
            li.traced(tp, seen, lambda m=mode, n=names, o=order, a=answer: run(m, n, o, a))
    now = datetime.now(UTC)
    li.store.insert("gold", [(li.tenant, f"li-{m}", "", "gold", 1, "qrels", now) for m in FAULTS],
                    ["tenant", "query_id", "trace_id", "doc_id", "relevance", "source", "added_at"])
    report = run_audit(li.store, tenant=li.tenant, release="li-audit", labeller="offline", relevance_labeller=None,
                       per_trace=tmp_path / "labels.jsonl", return_records=True)
    assert {r["query_id"]: r["failure_mode"] for r in report["records"]} == {f"li-{m}": m for m in FAULTS}
