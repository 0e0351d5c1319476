"""Interop: how much of what third-party instrumentation sends ragtrace reads right, or flags.

For each client below, ``--queries`` (200) queries with planted faults go through the client's real
instrumentation, a stock OpenTelemetry SDK (its default 128-attribute limit), OTLP/HTTP and a real
`ragtrace serve` app on an embedded store:

- ``langchain``: LCEL retrieve -> a reranking runnable -> prompt -> FakeListChatModel (half of them
  through ``stream()``), OpenInference's LangChain instrumentor;
- ``langchain-nested``: a compression retriever around a base retriever;
- ``llamaindex-event``: a node postprocessor that reports its rerank (a RERANKER span);
- ``llamaindex-callback``: a postprocessor that reports only to the legacy callbacks (no RERANKER span);
- ``llamaindex-stream``: ``streaming=True``;
- ``js``: the official OpenTelemetry JS SDK with OpenInference attributes set by hand
  (tests/collector/js/client.js; skipped, and said so, without Node.js or its packages).

Planted faults, per query i (a made-up compound with its melting point): ``ok`` (the gold passage is
shown, the answer states it), ``retrieval_gap`` (gold not retrieved), ``rank_inversion`` (retrieved,
not shown), ``under_use`` (shown, the answer abstains), ``fabrication`` (shown, the answer states
another number), and one query in ten ``lost`` (100 candidates: the SDK drops attributes, so the trace
must come out incomplete). Ground truth is what each client was given.

Reported per client:
- recovery: the share of traces whose pool, order, context and answer read back exactly, the share
  marked incomplete, and the share **silently wrong** (complete, yet something differs). Order means
  the reranker's output where the client records one, else the head of the final order equals what
  was shown. Target: 100 % recovered or marked incomplete, 0 silently wrong.
- failure-mode accuracy of `ragtrace audit` (offline labellers) over the complete traces, with gold ids
  given (qrels by query id, from the root's metadata) and without (the offline relevance labeller
  decides G); the planted ``lost`` traces must be ``incomplete``. Target with gold: >= 95 %.

``--value-length-limit N`` gives the Python clients' SDK ``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT`` N (as
``SpanLimits(max_attribute_length=N)``): every longer string value is cut to N characters without a flag, so
prompts and document lists that do not fit arrive cut. Such traces must come out incomplete, never
silently wrong.

Usage:  .venv/bin/python benchmarks/interop.py [--queries 200] [--clients langchain,js] [--value-length-limit N]
        [--json out.json]
Not a test: no asserts.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ragtrace_store import open_store  # noqa: E402
from tests.collector._interop import TOKEN, Collector, collector  # noqa: E402

MODES = ("ok", "retrieval_gap", "rank_inversion", "under_use", "fabrication")
ABSTAIN = "I cannot answer this from the provided documents."
CLIENTS = ("langchain", "langchain-nested", "llamaindex-event", "llamaindex-callback", "llamaindex-stream", "js")
SHOWN = 3


# --- the planted queries ----------------------------------------------------------------------------
@dataclass
class Planted:
    query_id: str
    query: str
    fault: str  # a mode, or "lost"
    pool: list[str]
    shown: list[str]
    answer: str
    texts: dict[str, str] = field(repr=False, default_factory=dict)

    @property
    def reranked(self) -> list[str]:
        """What a reranker that records its output outputs: the shown documents, then the rest."""
        return [*self.shown, *(d for d in self.pool if d not in self.shown)]


def passage(i: int, temp: int) -> str:
    return f"Compound K{i:03d} melts at {temp} degrees Celsius under standard pressure."


def plant(n: int, client: str, seed: int) -> list[Planted]:
    rng = random.Random(f"{seed}:{client}")
    temps = [200 + (37 * i) % 900 for i in range(n + 400)]
    generic = {f"g{j}": f"General note {j}: laboratory samples are stored in sealed glass vials." for j in range(20)}
    out = []
    for i in range(n):
        fault = "lost" if i % 10 == 9 else MODES[i % len(MODES)]
        gold = f"K{i:03d}"
        others = rng.sample([j for j in range(n + 400) if j != i], 5)
        texts = {gold: passage(i, temps[i]), **{f"K{j:03d}": passage(j, temps[j]) for j in others}}
        texts.update(dict(rng.sample(sorted(generic.items()), 2)))
        distractors = [d for d in texts if d != gold]
        if fault == "lost":
            extra = {f"x{i}-{k:03d}": f"Filler passage {k} of query {i} about unrelated storage rules."
                     for k in range(92)}
            texts.update(extra)
            pool = [gold, *distractors, *extra]
        elif fault == "retrieval_gap":
            pool = rng.sample(distractors, len(distractors))
        else:
            pool = rng.sample(list(texts), len(texts))
        if fault in ("retrieval_gap", "rank_inversion"):
            shown = [d for d in pool if d != gold][:SHOWN]
        else:
            shown = [gold, *[d for d in pool if d != gold][: SHOWN - 1]]
            rng.shuffle(shown)
        query = f"At what temperature does compound K{i:03d} melt?"
        good = f"Compound K{i:03d} melts at {temps[i]} degrees Celsius."
        elsewhere = texts[shown[0]] if shown[0] != gold else texts[shown[1]]
        answer = {"ok": good, "lost": good, "under_use": ABSTAIN,
                  "fabrication": f"Compound K{i:03d} melts at {temps[i] + 41} degrees Celsius.",
                  }.get(fault, elsewhere)
        out.append(Planted(f"{client}-q{i:03d}", query, fault, pool, shown, answer, texts))
    return out


# --- the clients ------------------------------------------------------------------------------------
def run_langchain(c: Collector, planted: list[Planted], *, nested: bool, release: str,
                  value_length: int | None = None) -> dict[str, str]:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import RunnableLambda, RunnablePassthrough
    from openinference.instrumentation.langchain import LangChainInstrumentor

    class Fixed(BaseRetriever):
        docs: list[Document]

        def _get_relevant_documents(self, query: str, *,
                                    run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
            return list(self.docs)

    class CompressTo(BaseRetriever):
        base: BaseRetriever
        keep: list[str]

        def _get_relevant_documents(self, query: str, *,
                                    run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
            found = self.base.invoke(query, config={"callbacks": run_manager.get_child()})
            return [next(d for d in found if d.metadata["id"] == k) for k in self.keep]

    prompt = ChatPromptTemplate.from_messages([("system", "Answer only from these passages:\n\n{context}"),
                                               ("human", "{question}")])

    def fmt(docs: list[Document]) -> str:
        return "\n\n".join(d.page_content for d in docs)

    tp, seen = c.provider("interop-langchain", release, max_value_length=value_length)
    inst = LangChainInstrumentor()
    inst.instrument(tracer_provider=tp)
    out = {}
    try:
        for k, p in enumerate(planted):
            docs = [Document(page_content=p.texts[d], metadata={"id": d}) for d in p.pool]
            if nested:
                context: Any = CompressTo(base=Fixed(docs=docs), keep=p.shown) | fmt
            else:
                keep = RunnableLambda(lambda ds, order=p.shown: [next(d for d in ds if d.metadata["id"] == o)
                                                                 for o in order], name="rerank")
                context = Fixed(docs=docs) | keep | fmt
            chain = ({"context": context, "question": RunnablePassthrough()} | prompt
                     | FakeListChatModel(responses=[p.answer]) | StrOutputParser())
            cfg: Any = {"metadata": {"query_id": p.query_id}}
            call: Callable[[], Any] = ((lambda ch=chain, cf=cfg, q=p.query: "".join(ch.stream(q, config=cf)))
                                       if k % 2 and not nested else (lambda ch=chain, cf=cfg, q=p.query:
                                                                     ch.invoke(q, config=cf)))
            (out[p.query_id],) = c.traced(tp, seen, call)
    finally:
        inst.uninstrument()
    return out


def run_llamaindex(c: Collector, planted: list[Planted], *, style: str, release: str,
                   value_length: int | None = None) -> dict[str, str]:
    from llama_index.core.base.response.schema import StreamingResponse
    from llama_index.core.callbacks import CBEventType, EventPayload
    from llama_index.core.instrumentation.events.rerank import ReRankEndEvent, ReRankStartEvent
    from llama_index.core.llms import CompletionResponse, CompletionResponseGen, CustomLLM, LLMMetadata
    from llama_index.core.llms.callbacks import llm_completion_callback
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
    from llama_index_instrumentation import get_dispatcher
    from openinference.instrumentation import using_metadata
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    dispatcher = get_dispatcher(__name__)

    class Scripted(CustomLLM):
        answer: str

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
        def __init__(self, nodes: list[NodeWithScore]) -> None:
            super().__init__()
            self.nodes = nodes

        def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            return list(self.nodes)

    class EventRerank(BaseNodePostprocessor):
        order: list[str]

        def _postprocess_nodes(self, nodes: list[NodeWithScore],
                               query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
            dispatcher.event(ReRankStartEvent(query=query_bundle, nodes=nodes, top_n=len(self.order),
                                              model_name="fixed"))
            out = [next(n for n in nodes if n.node.node_id == o) for o in self.order]
            dispatcher.event(ReRankEndEvent(nodes=out))
            return out

    class CallbackRerank(BaseNodePostprocessor):
        order: list[str]

        def _postprocess_nodes(self, nodes: list[NodeWithScore],
                               query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
            with self.callback_manager.event(CBEventType.RERANKING, payload={EventPayload.NODES: nodes}) as ev:
                out = [next(n for n in nodes if n.node.node_id == o) for o in self.order]
                ev.on_end(payload={EventPayload.NODES: out})
            return out

    tp, seen = c.provider("interop-llamaindex", release, max_value_length=value_length)
    inst = LlamaIndexInstrumentor()
    inst.instrument(tracer_provider=tp)
    out = {}
    try:
        for p in planted:
            nodes = [NodeWithScore(node=TextNode(id_=d, text=p.texts[d]), score=round(1 - k / 1000, 4))
                     for k, d in enumerate(p.pool)]
            rerank = CallbackRerank(order=p.shown) if style == "callback" else EventRerank(order=p.shown)
            engine = RetrieverQueryEngine.from_args(Fixed(nodes), llm=Scripted(answer=p.answer),
                                                    node_postprocessors=[rerank], streaming=style == "stream")

            def call(e: Any = engine, q: str = p.query, qid: str = p.query_id) -> None:
                with using_metadata({"query_id": qid}):
                    response = e.query(q)
                    if isinstance(response, StreamingResponse):
                        "".join(response.response_gen)

            (out[p.query_id],) = c.traced(tp, seen, call)
    finally:
        inst.uninstrument()
    return out


def run_js(c: Collector, planted: list[Planted], *, release: str) -> dict[str, str] | str:
    js = ROOT / "tests" / "collector" / "js"
    node = shutil.which("node")
    if node is None:
        return "Node.js is not installed"
    if not (js / "node_modules" / "@opentelemetry" / "sdk-trace-base").is_dir():
        return "the JS client's packages are not installed (npm ci --prefix tests/collector/js)"
    traces = [{"queryId": p.query_id, "query": p.query, "candidates": [[d, p.texts[d]] for d in p.pool],
               "reranked": p.reranked, "shown": p.shown, "answer": p.answer} for p in planted]
    plan = {"endpoint": c.url, "token": TOKEN, "release": release, "attributeLimit": None, "traces": traces}
    proc = subprocess.run([node, str(js / "client.js")], input=json.dumps(plan), capture_output=True, text=True,
                          timeout=600, cwd=js)
    if proc.returncode != 0:
        return f"the JS client failed: {proc.stderr[-500:]}"
    assert c.app.state.writer.flush(60)
    return {(o := json.loads(line))["queryId"]: o["traceId"] for line in proc.stdout.splitlines()}


# --- scoring ----------------------------------------------------------------------------------------
def recovery(c: Collector, client: str, planted: list[Planted], trace_ids: dict[str, str]) -> dict[str, Any]:
    records = {}
    ids = list(trace_ids.values())
    for i in range(0, len(ids), 200):
        for rec in c.store.read_traces(tenant=c.tenant, trace_ids=ids[i:i + 200]):
            records[rec.trace_id] = rec
    explicit_order = client in ("langchain-nested", "llamaindex-event", "llamaindex-stream", "js")
    counts = {"exact": 0, "incomplete": 0, "silently_wrong": 0, "missing": 0}
    wrong: list[dict[str, Any]] = []
    for p in planted:
        rec = records.get(trace_ids.get(p.query_id, ""))
        if rec is None:
            counts["missing"] += 1
            continue
        if not rec.complete:
            counts["incomplete"] += 1
            continue
        got_order = [d.id for d in (rec.reranked or rec.retrieved)]
        checks = {
            "pool": [d.id for d in rec.retrieved] == p.pool,
            # the JS client's reranker outputs the shown documents and then the rest; the others the shown
            "order": (got_order == (p.reranked if client == "js" else p.shown)) if explicit_order
            else got_order[:len(p.shown)] == p.shown,
            "context": [d.id for d in rec.context] == p.shown,
            "answer": rec.answer == p.answer,
        }
        if all(checks.values()):
            counts["exact"] += 1
        else:
            counts["silently_wrong"] += 1
            if len(wrong) < 5:
                wrong.append({"query_id": p.query_id, "fault": p.fault, **{k: v for k, v in checks.items() if not v}})
    n = len(planted)
    lost = sum(1 for p in planted if p.fault == "lost")
    lost_flagged = sum(1 for p in planted if p.fault == "lost" and (r := records.get(trace_ids.get(p.query_id, "")))
                       is not None and not r.complete)
    return {"n": n, **counts, "share_exact_or_incomplete": (counts["exact"] + counts["incomplete"]) / n,
            "share_silently_wrong": counts["silently_wrong"] / n, "planted_lost": lost,
            "planted_lost_marked_incomplete": lost_flagged, "examples_wrong": wrong}


def accuracy(report: dict[str, Any], planted: dict[str, Planted]) -> dict[str, dict[str, Any]]:
    per: dict[str, dict[str, Any]] = {}
    for rec in report["records"]:
        p = planted.get(rec["query_id"])
        if p is None:
            continue
        expected = "incomplete" if p.fault == "lost" else p.fault
        client = p.query_id.rsplit("-q", 1)[0]
        row = per.setdefault(client, {"n": 0, "right": 0, "n_complete": 0, "right_complete": 0, "confusion": {}})
        row["n"] += 1
        row["right"] += rec["failure_mode"] == expected
        if rec["failure_mode"] != "incomplete":
            row["n_complete"] += 1
            row["right_complete"] += rec["failure_mode"] == expected
        if rec["failure_mode"] != expected:
            key = f"{expected}->{rec['failure_mode']}"
            row["confusion"][key] = row["confusion"].get(key, 0) + 1
    for row in per.values():
        row["accuracy"] = row["right"] / row["n"] if row["n"] else None
        row["accuracy_complete"] = row["right_complete"] / row["n_complete"] if row["n_complete"] else None
    return per


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--clients", default=",".join(CLIENTS))
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--value-length-limit", type=int, help="the Python clients' OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT")
    ap.add_argument("--json", dest="json_path")
    args = ap.parse_args(argv)
    clients = [x.strip() for x in args.clients.split(",") if x.strip()]
    unknown = sorted(set(clients) - set(CLIENTS))
    if unknown:
        ap.error(f"unknown clients {unknown}: choose from {', '.join(CLIENTS)}")

    from ragtrace_evaluator.audit.run import run_audit

    results: dict[str, Any] = {"queries_per_client": args.queries, "value_length_limit": args.value_length_limit,
                               "clients": {}, "skipped": {}}
    planted_all: dict[str, Planted] = {}
    with tempfile.TemporaryDirectory(prefix="ragtrace-interop-") as tmp:
        store = open_store(str(Path(tmp) / "store"), migrate=True)
        with collector(store, Path(tmp)) as c:
            for client in clients:
                planted = plant(args.queries, client, args.seed)
                t0 = time.perf_counter()
                if client.startswith("langchain"):
                    got: dict[str, str] | str = run_langchain(c, planted, nested=client == "langchain-nested",
                                                              release=client, value_length=args.value_length_limit)
                elif client.startswith("llamaindex"):
                    got = run_llamaindex(c, planted, style=client.split("-", 1)[1], release=client,
                                         value_length=args.value_length_limit)
                else:
                    got = run_js(c, planted, release=client)
                if isinstance(got, str):
                    results["skipped"][client] = got
                    print(f"{client}: skipped ({got})", flush=True)
                    continue
                planted_all.update({p.query_id: p for p in planted})
                results["clients"][client] = {"recovery": recovery(c, client, planted, got),
                                              "seconds_to_send": round(time.perf_counter() - t0, 1)}
                print(f"{client}: {json.dumps(results['clients'][client]['recovery'])}", flush=True)
            # without gold ids: the offline relevance labeller decides G
            t0 = time.perf_counter()
            without = run_audit(store, tenant=c.tenant, labeller="offline", relevance_labeller="offline",
                                return_records=True)
            seconds_without = time.perf_counter() - t0
            # with gold ids: qrels by query id (the query ids the clients sent in their metadata)
            now = datetime.now(UTC)
            store.insert("gold", [(c.tenant, qid, "", f"K{int(qid.rsplit('-q', 1)[1]):03d}", 1, "qrels", now)
                                  for qid in planted_all],
                         ["tenant", "query_id", "trace_id", "doc_id", "relevance", "source", "added_at"])
            t0 = time.perf_counter()
            with_gold = run_audit(store, tenant=c.tenant, labeller="offline", relevance_labeller=None,
                                  return_records=True)
            seconds_with = time.perf_counter() - t0
            acc_with, acc_without = accuracy(with_gold, planted_all), accuracy(without, planted_all)
            for client, row in results["clients"].items():
                row["failure_mode_accuracy_with_gold"] = acc_with.get(client)
                row["failure_mode_accuracy_without_gold"] = acc_without.get(client)
            results["audit_seconds"] = {"with_gold": round(seconds_with, 1), "without_gold": round(seconds_without, 1)}
            results["audit_incomplete"] = with_gold["incomplete"]
        store.close()

    print("\nclient               exact  incomplete  silently-wrong  lost->incomplete  mode acc. (gold)  (no gold)")
    for client, row in results["clients"].items():
        r = row["recovery"]
        a, b = row["failure_mode_accuracy_with_gold"] or {}, row["failure_mode_accuracy_without_gold"] or {}
        print(f"{client:<20} {r['exact']:>5}  {r['incomplete']:>10}  {r['silently_wrong']:>14}  "
              f"{r['planted_lost_marked_incomplete']:>7}/{r['planted_lost']:<8}  "
              f"{100 * (a.get('accuracy') or 0):>15.1f}%  {100 * (b.get('accuracy') or 0):>8.1f}%")
    for client, why in results["skipped"].items():
        print(f"{client:<20} skipped: {why}")
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
