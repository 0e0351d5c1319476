"""A service instrumented by hand with the stock OpenTelemetry SDK and the GenAI semantic conventions
(``gen_ai.*``), no OpenInference and no ragtrace SDK, exporting over OTLP/HTTP to a real serve app:
the documents of ``gen_ai.retrieval.documents``, the query of ``gen_ai.retrieval.query.text``, the
prompt and answer of ``gen_ai.input/output.messages`` and the query id of ``gen_ai.conversation.id``
are read."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from ._interop import GOOD, PASSAGES, QUERY, Collector, collector

NAMES = list(PASSAGES)


@pytest.fixture(scope="module")
def otel(chdb_store: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    with collector(chdb_store, tmp_path_factory.mktemp("otel")) as c:
        yield c


def test_gen_ai_retrieval_and_chat_spans(otel: Collector) -> None:
    tp, seen = otel.provider("genai-rag", "g1")
    tracer = tp.get_tracer("hand-written")
    shown = ["gold", "ice"]

    def handle() -> None:
        # an HTTP handler's span as the root: no input.value, the query is the retrieval's
        with tracer.start_as_current_span("POST /ask", attributes={"gen_ai.conversation.id": "conv-7"}):
            with tracer.start_as_current_span("retrieval kb", attributes={
                    "gen_ai.operation.name": "retrieval", "gen_ai.retrieval.query.text": QUERY,
                    "gen_ai.retrieval.documents": json.dumps(
                        [{"id": n, "score": round(1 - i / 10, 2), "content": PASSAGES[n]}
                         for i, n in enumerate(NAMES)])}):
                pass
            system = "Use these passages:\n" + "\n\n".join(PASSAGES[n] for n in shown)
            with tracer.start_as_current_span("chat small-model", attributes={
                    "gen_ai.operation.name": "chat",
                    "gen_ai.input.messages": json.dumps([
                        {"role": "system", "parts": [{"type": "text", "content": system}]},
                        {"role": "user", "parts": [{"type": "text", "content": QUERY}]}]),
                    "gen_ai.output.messages": json.dumps([
                        {"role": "assistant", "parts": [{"type": "text", "content": GOOD}],
                         "finish_reason": "stop"}])}):
                pass

    (tid,) = otel.traced(tp, seen, handle)
    rec = otel.record(tid)
    assert [d.id for d in rec.retrieved] == NAMES and rec.retrieved[1].score == 0.9
    assert rec.retrieved[0].content == PASSAGES["gold"]
    assert [d.id for d in rec.context] == shown and rec.context_source == "prompt"
    assert (rec.query, rec.answer, rec.query_id) == (QUERY, GOOD, "conv-7")
    assert rec.complete

    (stray,) = otel.traced(tp, seen, lambda: tracer.start_span("chat m", attributes={
        "gen_ai.operation.name": "chat"}).end())
    assert list(otel.store.read_traces(tenant=otel.tenant, trace_ids=[stray])) == []


def test_a_document_list_cut_by_the_sdks_value_length_limit_is_incomplete_and_the_sender_told(
        otel: Collector) -> None:
    """The stock SDK's OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT (400 here) cuts the JSON of the eight retrieved
    documents: it no longer parses, so read as whole the pool would be empty and the trace complete."""
    limit = 400
    documents = json.dumps([{"id": n, "score": round(1 - i / 10, 2), "content": PASSAGES[n]}
                            for i, n in enumerate(NAMES)])
    assert len(documents) > limit
    tp, seen = otel.provider("genai-rag", "g-cut", max_value_length=limit)
    tracer = tp.get_tracer("hand-written")

    def handle() -> None:
        with tracer.start_as_current_span("POST /ask"):
            with tracer.start_as_current_span("retrieval kb", attributes={
                    "gen_ai.operation.name": "retrieval", "gen_ai.retrieval.query.text": QUERY,
                    "gen_ai.retrieval.documents": documents}):
                pass
            with tracer.start_as_current_span("chat small-model", attributes={
                    "gen_ai.operation.name": "chat",
                    "gen_ai.output.messages": json.dumps([
                        {"role": "assistant", "parts": [{"type": "text", "content": GOOD}]}])}):
                pass

    (tid,) = otel.traced(tp, seen, handle)
    told = otel.resend(seen)
    rec = otel.record(tid)
    assert rec.retrieved == () and not rec.complete
    assert any(r.startswith("cut_value: span 'retrieval kb' (RETRIEVER): gen_ai.retrieval.documents arrived cut")
               and "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT" in r for r in rec.incomplete_reasons), rec.incomplete_reasons
    assert (f"gen_ai.retrieval.documents of span 'retrieval kb' is not valid JSON ({limit} characters)" in told
            and "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT" in told), told
