"""Review test data: traces and labels written straight into the shared chDB store, one tenant per test.

The collector and audit write these rows in production; here they are inserted directly so the
review tests depend only on the store schema, not on the other components being ready.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ragtrace_store import Store

HOSTILE = "<script>alert(1)</script>"


@dataclass
class FakeTrace:
    trace_id: str
    query: str
    answer: str
    retrieved: list[tuple[str, float]]  # (doc id, score) in rank order
    reranked: list[tuple[str, float]]
    context: list[str]
    texts: dict[str, str]
    gold: list[str] = field(default_factory=list)
    query_id: str = ""


def _now() -> datetime:
    return datetime.now(UTC)  # aware: clickhouse-connect would write a naive time as local time


def write_trace(store: Store, tenant: str, t: FakeTrace, *, service: str = "svc", release: str = "r1") -> None:
    now = _now()
    store.insert("queries", [(tenant, t.trace_id, "root", t.query_id, service, release, "test", "/ask", t.query,
                              t.answer, False, "OK", now, 12.0, now)],
                 ["tenant", "trace_id", "span_id", "query_id", "service", "release", "environment", "route",
                  "query", "answer", "answer_streamed", "status_code", "start_time", "duration_ms", "received_at"])
    docs = []
    for stage, span, items in (("retrieved", "s-ret", t.retrieved), ("reranked", "s-rr", t.reranked),
                               ("context", "s-gen", [(d, None) for d in t.context])):
        for rank, (doc_id, score) in enumerate(items):
            h = hashlib.sha256(t.texts[doc_id].encode()).hexdigest()
            docs.append((tenant, t.trace_id, span, stage, rank, doc_id, score, h, "", None, now, now))
    store.insert("documents", docs, ["tenant", "trace_id", "span_id", "stage", "rank", "doc_id", "score",
                                     "content_hash", "metadata", "top_k", "start_time", "received_at"])
    store.insert("passages", [(tenant, hashlib.sha256(text.encode()).hexdigest(), text, False, now)
                              for text in t.texts.values()],
                 ["tenant", "content_hash", "content", "truncated", "first_seen"])
    if t.gold:
        store.insert("gold", [(tenant, "", t.trace_id, d, 1, "span", now) for d in t.gold],
                     ["tenant", "query_id", "trace_id", "doc_id", "relevance", "source", "added_at"])


def label_record(trace_id: str, mode: str, *, confidence: float = 0.9, manifest_id: str = "m-test",
                 claims: Sequence[tuple[str, str, str | None]] = (), query_id: str = "") -> dict[str, Any]:
    """A per-trace label record of the shared contract; claims are (text, verdict, passage id)."""
    return {
        "trace_id": trace_id, "query_id": query_id, "release": "r1", "service": "svc", "manifest_id": manifest_id,
        "failure_mode": mode, "gold_in_pool": mode != "retrieval_gap", "gold_in_context": mode in ("ok", "fabrication"),
        "retrieval": {"gold_in_pool": mode != "retrieval_gap", "gold_in_context": mode in ("ok", "fabrication"),
                      "n_gold": 1, "gold_source": "span"},
        "ranking": {"ok": mode != "rank_inversion", "best_gold_rank": 1, "best_distractor_rank": 2},
        "generation": {"verdict": "entailed" if mode == "ok" else "neutral", "groundedness": 0.5, "abstained": False,
                       "refusal_justified": None,
                       "claims": [{"claim": c, "verdict": v, "support": 0.8, "contradiction": 0.1, "passage_id": p}
                                  for c, v, p in claims]},
        "metrics": {}, "pass": mode == "ok", "score": 0.5, "confidence": confidence,
    }


def write_labels(store: Store, tenant: str, records: Sequence[dict[str, Any]]) -> None:
    now = _now()
    store.insert("labels", [(
        tenant, r["manifest_id"], r["trace_id"], r["query_id"], r["service"], r["release"], r["failure_mode"],
        r["gold_in_pool"], r["gold_in_context"], r["ranking"]["ok"], r["generation"]["verdict"], r["pass"],
        r["score"], r["confidence"], json.dumps(r), now, now) for r in records],
        ["tenant", "manifest_id", "trace_id", "query_id", "service", "release", "failure_mode", "gold_in_pool",
         "gold_in_context", "ranking_ok", "generation", "passed", "score", "confidence", "detail", "trace_time",
         "labelled_at"])


def sample_trace(trace_id: str, *, hostile: bool = False) -> FakeTrace:
    texts = {
        "d1": "Paris is the capital of France.",
        "d2": HOSTILE if hostile else "Lyon is a city in France.",
        "d3": "The Eiffel Tower is 330 metres tall.",
        "d4": "Berlin is the capital of Germany.",
    }
    return FakeTrace(
        trace_id=trace_id, query="What is the capital of France? <b>bold?</b>",
        answer="The capital of France is Paris. It has the Eiffel Tower.",
        retrieved=[("d4", 0.9), ("d2", 0.8), ("d1", 0.7), ("d3", 0.6)],
        reranked=[("d1", 0.95), ("d2", 0.5), ("d3", 0.4)],
        context=["d1", "d2"], texts=texts, gold=["d1"], query_id=f"q-{trace_id}",
    )


SAMPLE_CLAIMS = (("The capital of France is Paris.", "entailed", "d1"),
                 ("It has the Eiffel Tower.", "neutral", "d3"))


