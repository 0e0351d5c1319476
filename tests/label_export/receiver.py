"""A real OTLP/HTTP logs receiver on loopback: `POST /v1/logs` bodies decoded as the protobuf
`ExportLogsServiceRequest` (the encoding every OTLP/HTTP exporter sends by default), the log records
kept with their resource and scope. It can refuse its first requests with 503, as a receiver that
is restarting or shedding load does."""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request, Response
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest, ExportLogsServiceResponse
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


def plain(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    return None if kind is None else getattr(value, kind)


@dataclass(frozen=True)
class ReceivedEvent:
    """One log record as received: its ids in hex, event name, attributes, resource and scope."""

    trace_id: str
    span_id: str
    event_name: str
    attributes: dict[str, Any]
    resource: dict[str, Any]
    scope: str
    flags: int
    time_unix_nano: int


class LogReceiver:
    def __init__(self, *, refuse_first: int = 0) -> None:
        self._lock = threading.Lock()
        self.refuse_left = refuse_first
        self.refused = 0
        self.requests: list[ExportLogsServiceRequest] = []

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/v1/logs")
        async def logs(request: Request) -> Response:
            body = await request.body()
            with self._lock:
                if self.refuse_left > 0:
                    self.refuse_left -= 1
                    self.refused += 1
                    return Response(status_code=503)
            if request.headers.get("content-encoding") == "gzip":
                body = gzip.decompress(body)
            if request.headers.get("content-type") != "application/x-protobuf":
                return Response(status_code=415)
            req = ExportLogsServiceRequest()
            req.ParseFromString(body)
            with self._lock:
                self.requests.append(req)
            return Response(ExportLogsServiceResponse().SerializeToString(), media_type="application/x-protobuf")

        return app

    def events(self) -> list[ReceivedEvent]:
        with self._lock:
            requests = list(self.requests)
        out = []
        for req in requests:
            for rl in req.resource_logs:
                resource = {kv.key: plain(kv.value) for kv in rl.resource.attributes}
                for sl in rl.scope_logs:
                    for lr in sl.log_records:
                        out.append(ReceivedEvent(lr.trace_id.hex(), lr.span_id.hex(), lr.event_name,
                                                 {kv.key: plain(kv.value) for kv in lr.attributes}, resource,
                                                 sl.scope.name, lr.flags, lr.time_unix_nano))
        return out
