"""A small OTLP/HTTP receiver for tests: a real HTTP server on loopback that decodes requests with
``opentelemetry.proto`` and can answer with scripted status codes (to exercise retries)."""

from __future__ import annotations

import gzip
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span


def any_value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return tuple(any_value(v) for v in value.array_value.values)
    return getattr(value, kind) if kind else None


def span_attributes(span: Span) -> dict[str, Any]:
    return {kv.key: any_value(kv.value) for kv in span.attributes}


class Receiver:
    """``url`` is the base endpoint; requests land in ``requests`` (decoded) with their headers."""

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self.headers: list[dict[str, str]] = []
        self.script: deque[tuple[int, dict[str, str]]] = deque()  # responses to give before 200s
        self.lock = threading.Lock()
        self.arrived = threading.Condition(self.lock)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver.lock:
                    status, extra = receiver.script.popleft() if receiver.script else (200, {})
                    receiver.headers.append({k.lower(): v for k, v in self.headers.items()})
                    if status == 200:
                        if self.headers.get("Content-Encoding") == "gzip":
                            body = gzip.decompress(body)
                        request = ExportTraceServiceRequest()
                        request.ParseFromString(body)
                        receiver.requests.append(request)
                        receiver.arrived.notify_all()
                self.send_response(status)
                for key, value in extra.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def spans(self) -> list[tuple[dict[str, Any], Span]]:
        """Every received span with its resource attributes."""
        out = []
        with self.lock:
            for request in self.requests:
                for rs in request.resource_spans:
                    resource = {kv.key: any_value(kv.value) for kv in rs.resource.attributes}
                    for ss in rs.scope_spans:
                        out.extend((resource, span) for span in ss.spans)
        return out

    def wait_for_spans(self, n: int, timeout: float = 10.0) -> list[tuple[dict[str, Any], Span]]:
        with self.arrived:
            self.arrived.wait_for(lambda: sum(
                len(ss.spans) for r in self.requests for rs in r.resource_spans for ss in rs.scope_spans) >= n,
                timeout)
        return self.spans()
