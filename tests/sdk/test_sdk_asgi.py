"""The ASGI middleware through a real FastAPI app (httpx's ASGI transport, and uvicorn on loopback)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.responses import StreamingResponse
from opentelemetry.trace import SpanKind, StatusCode

import ragtrace
from ragtrace import semconv as sc
from ragtrace.asgi import RagtraceMiddleware, parse_traceparent
from tests.loopback import serving

from .util import short

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


@ragtrace.retriever
def retrieve(query: str) -> list[dict[str, str]]:
    return [{"id": "d1", "text": "Paris is in France."}]


@ragtrace.generator
async def stream_answer(prompt: str, context: list[dict[str, str]]) -> AsyncIterator[str]:
    for chunk in ("Paris ", "is ", "in France."):
        await asyncio.sleep(0)
        yield chunk


@ragtrace.pipeline
def ask_pipeline(query: str, query_id: str | None = None) -> str:
    retrieve(query)
    return "Paris"


@ragtrace.pipeline
def ask_stream(query: str) -> AsyncIterator[str]:
    return stream_answer(query, retrieve(query))


@ragtrace.generator
def sync_chunks(prompt: str, context: list[dict[str, str]]) -> Iterator[str]:
    yield from ("Lyon ", "too.")


@ragtrace.pipeline
def ask_sync_stream(query: str) -> Iterator[str]:
    return sync_chunks(query, retrieve(query))


def make_app() -> FastAPI:
    app = FastAPI()

    @app.get("/ask/{topic}")
    def ask(topic: str, q: str) -> dict[str, Any]:
        return {"answer": ask_pipeline(q, query_id=f"{topic}-1"), "trace_id": ragtrace.current_trace_id()}

    @app.get("/stream")
    def stream(q: str) -> StreamingResponse:
        return StreamingResponse(ask_stream(q), media_type="text/plain")

    @app.get("/stream-sync")
    def stream_sync(q: str) -> StreamingResponse:
        return StreamingResponse(ask_sync_stream(q), media_type="text/plain")

    @app.get("/search")
    def search(q: str) -> list[dict[str, str]]:
        return retrieve(q)  # no pipeline: the request span is the query root

    @app.get("/boom")
    def boom() -> None:
        raise RuntimeError("handler failed")

    @app.get("/health")
    def health() -> str:
        return "ok"

    app.add_middleware(RagtraceMiddleware, trace_id_header="x-trace-id", exclude_paths=["/health"])
    return app


def _get(app: FastAPI, url: str, **kwargs: Any) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await client.get(url, **kwargs)

    return asyncio.run(go())


def test_request_span_route_status_and_traceparent(memory: Any) -> None:
    app = make_app()
    response = _get(app, "/ask/geo?q=capital", headers={"traceparent": f"00-{TRACE}-{PARENT}-01"})
    assert response.status_code == 200
    body = response.json()
    assert body["answer"] == "Paris" and body["trace_id"] == TRACE
    assert response.headers["x-trace-id"] == TRACE
    spans = {short(s.name): s for s in memory()}
    request = spans["GET /ask/{topic}"]
    assert request.kind == SpanKind.SERVER
    assert request.context.trace_id == int(TRACE, 16)
    assert request.parent is not None and request.parent.span_id == int(PARENT, 16) and request.parent.is_remote
    assert dict(request.attributes or {}) == {
        sc.SPAN_KIND: "CHAIN", sc.HTTP_REQUEST_METHOD: "GET", sc.URL_PATH: "/ask/geo",
        sc.HTTP_ROUTE: "/ask/{topic}", sc.HTTP_RESPONSE_STATUS_CODE: 200,
        # the request root carries the pipeline's query, answer and id too
        sc.INPUT_VALUE: "capital", sc.OUTPUT_VALUE: "Paris", sc.QUERY_ID: "geo-1", sc.CONTENT_MODE: "full",
    }
    pipeline = spans["ask_pipeline"]
    assert pipeline.parent is not None and pipeline.parent.span_id == request.context.span_id
    # the pipeline span is marked as the query root; the request span (no SDK marker) is not
    assert (pipeline.attributes or {})[sc.SDK_VERSION] == ragtrace.__version__
    assert spans["retrieve"].parent is not None
    assert spans["retrieve"].parent.span_id == pipeline.context.span_id


def test_request_without_pipeline_is_the_query_root(memory: Any) -> None:
    assert _get(make_app(), "/search?q=paris").status_code == 200
    spans = {short(s.name): s for s in memory()}
    request = spans["GET /search"]
    assert (request.attributes or {})[sc.SDK_VERSION] == ragtrace.__version__
    assert spans["retrieve"].parent is not None
    assert spans["retrieve"].parent.span_id == request.context.span_id


def test_streaming_response_records_the_whole_answer(memory: Any) -> None:
    response = _get(make_app(), "/stream?q=where")
    assert response.text == "Paris is in France."
    spans = {short(s.name): s for s in memory()}
    request = spans["GET /stream"]
    for name in ("ask_stream", "stream_answer"):
        assert (spans[name].attributes or {})[sc.OUTPUT_VALUE] == "Paris is in France."
    assert (request.attributes or {})[sc.OUTPUT_VALUE] == "Paris is in France."
    assert (request.attributes or {})[sc.ANSWER_STREAMED] is True
    assert request.end_time >= spans["stream_answer"].end_time
    assert spans["stream_answer"].parent is not None
    assert spans["stream_answer"].parent.span_id == spans["ask_stream"].context.span_id


def test_sync_streaming_response_iterated_in_a_threadpool(memory: Any) -> None:
    response = _get(make_app(), "/stream-sync?q=which")
    assert response.text == "Lyon too."
    spans = {short(s.name): s for s in memory()}
    assert set(spans) == {"GET /stream-sync", "ask_sync_stream", "retrieve", "sync_chunks"}
    assert (spans["GET /stream-sync"].attributes or {})[sc.OUTPUT_VALUE] == "Lyon too."
    assert spans["sync_chunks"].parent is not None
    assert spans["sync_chunks"].parent.span_id == spans["ask_sync_stream"].context.span_id
    assert len({s.context.trace_id for s in spans.values()}) == 1


def test_handler_exception_marks_request_and_is_reraised(memory: Any) -> None:
    response = _get(make_app(), "/boom")
    assert response.status_code == 500
    (request,) = memory()
    assert request.status.status_code == StatusCode.ERROR
    assert (request.attributes or {})[sc.HTTP_RESPONSE_STATUS_CODE] == 500


def test_excluded_paths_and_malformed_traceparent(memory: Any) -> None:
    app = make_app()
    assert _get(app, "/health").status_code == 200
    _get(app, "/ask/x?q=y", headers={"traceparent": "00-zzzz-00f067aa0ba902b7-01"})
    spans = memory()
    assert not any("health" in s.name for s in spans)
    request = next(s for s in spans if s.name == "GET /ask/{topic}")
    assert request.parent is None  # a malformed header starts a fresh trace


@pytest.mark.parametrize(("header", "ok"), [
    (f"00-{TRACE}-{PARENT}-01", True),
    (f"00-{TRACE}-{PARENT}-00", True),
    (f"01-{TRACE}-{PARENT}-01-future", True),
    (f"00-{TRACE}-{PARENT}-01-extra", False),
    (f"00-{'0' * 32}-{PARENT}-01", False),
    (f"ff-{TRACE}-{PARENT}-01", False),
    (f"00-{TRACE[:-1]}-{PARENT}-01", False),
    ("", False),
])
def test_parse_traceparent(header: str, ok: bool) -> None:
    ctx = parse_traceparent(header)
    assert (ctx is not None) == ok
    if ctx is not None:
        assert ctx.trace_id == int(TRACE, 16) and ctx.is_remote


@pytest.fixture
def live_server() -> Iterator[str]:
    with serving(make_app(), lifespan="off") as url:
        yield url


def test_real_uvicorn_streaming_with_traceparent(memory: Any, live_server: str) -> None:
    with httpx.Client() as client, client.stream(
            "GET", f"{live_server}/stream", params={"q": "where"},
            headers={"traceparent": f"00-{TRACE}-{PARENT}-01"}) as response:
        chunks = list(response.iter_text())
        trace_header = response.headers["x-trace-id"]
    assert "".join(chunks) == "Paris is in France."
    assert trace_header == TRACE
    # the server ends its span after the last chunk is sent, so the client can finish first
    deadline = time.monotonic() + 10
    spans = {short(s.name): s for s in memory()}
    while "GET /stream" not in spans and time.monotonic() < deadline:
        time.sleep(0.02)
        spans = {short(s.name): s for s in memory()}
    assert {s.context.trace_id for s in spans.values()} == {int(TRACE, 16)}
    assert (spans["GET /stream"].attributes or {})[sc.OUTPUT_VALUE] == "Paris is in France."
