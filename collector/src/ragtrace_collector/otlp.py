"""OTLP/HTTP request bodies → `ExportTraceServiceRequest`, with the spec's status codes.

Decoding uses the official opentelemetry-proto messages (protobuf, and `json_format` for the
JSON encoding). The OTLP JSON mapping differs from protobuf's canonical JSON in one place that
matters: trace and span ids are hex strings, not base64, so they are converted before parsing.
Every failure is an `OtlpError` carrying the HTTP status and a reason the sender can act on.
"""

from __future__ import annotations

import base64
import re
import zlib
from typing import Any

import orjson
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

PROTOBUF = "application/x-protobuf"
JSON = "application/json"


class OtlpError(Exception):
    """A request the collector refuses; ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason

    def __reduce__(self) -> tuple[type[OtlpError], tuple[int, str]]:
        # raised in ingest worker processes and re-raised in the server: must pickle whole
        return (OtlpError, (self.status, self.reason))


def media_type(content_type: str | None) -> str:
    """The bare media type of a Content-Type header, or raise 415."""
    mt = (content_type or "").split(";", 1)[0].strip().lower()
    if mt in (PROTOBUF, JSON):
        return mt
    raise OtlpError(
        415,
        f"unsupported Content-Type {content_type!r}: send OTLP as {PROTOBUF} or {JSON}",
    )


def decompress(body: bytes, encoding: str | None, limit: int) -> bytes:
    """Undo ``Content-Encoding`` (identity or gzip, every member of it); the decoded size is capped too
    (no zip bombs)."""
    enc = (encoding or "identity").strip().lower()
    if enc in ("", "identity"):
        return body
    if enc != "gzip":
        raise OtlpError(415, f"unsupported Content-Encoding {encoding!r}: use gzip or none")
    return _gunzip(body, limit)


#: gzip members after the first are fed this much at a time: a member's end leaves at most one
#: chunk of unused input to copy, however many members follow
_GZIP_CHUNK = 64 * 1024
#: more members than this is not a client compressing a request (a denial of service, more likely)
GZIP_MAX_MEMBERS = 1024
_ZEROS = re.compile(rb"\0*")


def _skip_zeros(body: bytes, pos: int) -> int:
    found = _ZEROS.match(body, pos)
    return found.end() if found else pos  # `\0*` always matches; the else is for the type checker


def _gunzip(body: bytes, limit: int) -> bytes:
    """Every member of a gzip body, decoded and joined, at most ``limit`` bytes.

    RFC 1952 allows several members (what concatenating .gz files, or a compressor that flushes
    per block, produces); they decode to the concatenation, which for protobuf is one request with
    the repeated fields joined. Stopping after the first would acknowledge data never read. Zero
    padding between or after members is skipped, as gzip(1) does.
    """
    d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        first = d.decompress(body, limit + 1)  # the usual single member: one call, no extra copy
    except zlib.error as exc:
        raise OtlpError(400, f"gzip body is corrupt: {exc}") from exc
    if len(first) > limit:
        raise OtlpError(413, f"decompressed body exceeds {limit} bytes (RAGTRACE_MAX_BODY_BYTES)")
    if not d.eof:
        raise OtlpError(400, "gzip body is truncated")
    n = len(body)
    pos = _skip_zeros(body, n - len(d.unused_data))
    if pos >= n:
        return first
    parts, size, view = [first], len(first), memoryview(body)
    members = 1
    while pos < n:
        members += 1
        if members > GZIP_MAX_MEMBERS:
            raise OtlpError(400, f"gzip body has more than {GZIP_MAX_MEMBERS} members; compress the request "
                                 "as one member")
        d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        while not d.eof:
            if pos >= n:
                raise OtlpError(400, f"gzip body is truncated (member {members})")
            chunk = view[pos:pos + _GZIP_CHUNK]
            try:
                out = d.decompress(chunk, limit - size + 1)
            except zlib.error as exc:
                raise OtlpError(400, f"gzip body is corrupt (member {members}): {exc}") from exc
            size += len(out)
            if size > limit:
                raise OtlpError(413, f"decompressed body exceeds {limit} bytes (RAGTRACE_MAX_BODY_BYTES)")
            parts.append(out)
            pos += len(chunk) - len(d.unused_data)
        pos = _skip_zeros(body, pos)
    return b"".join(parts)


def parse_request(body: bytes, mt: str) -> ExportTraceServiceRequest:
    """Parse a decompressed body; 400 with the parser's reason when it is malformed."""
    msg = ExportTraceServiceRequest()
    if mt == PROTOBUF:
        try:
            msg.ParseFromString(body)
        except (DecodeError, ValueError, RuntimeError) as exc:
            raise OtlpError(400, f"malformed OTLP protobuf body: {exc}") from exc
        return msg
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise OtlpError(400, f"malformed JSON body: {exc}") from exc
    if not isinstance(data, dict):
        raise OtlpError(400, "OTLP JSON body must be an object with 'resourceSpans'")
    try:
        _hex_ids_to_base64(data)
        # Receivers must ignore unknown fields (OTLP spec: forward compatibility).
        json_format.ParseDict(data, msg, ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError, TypeError, AttributeError) as exc:
        raise OtlpError(400, f"malformed OTLP JSON: {exc}") from exc
    return msg


_ID_FIELDS = ("traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id")


def _hex_ids_to_base64(data: dict[str, Any]) -> None:
    """OTLP/JSON encodes ids as hex; protobuf's JSON mapping expects base64 for bytes fields."""
    for rs in _list(data, "resourceSpans", "resource_spans"):
        for ss in _list(rs, "scopeSpans", "scope_spans"):
            for span in _list(ss, "spans"):
                _fix_ids(span)
                for link in _list(span, "links"):
                    _fix_ids(link)


def _list(obj: Any, *names: str) -> list[Any]:
    if not isinstance(obj, dict):
        raise ValueError(f"expected an object, got {type(obj).__name__}")
    for name in names:
        value = obj.get(name)
        if value is None:
            continue
        if not isinstance(value, list):
            raise ValueError(f"'{name}' must be an array")
        return value
    return []


def _fix_ids(obj: Any) -> None:
    if not isinstance(obj, dict):
        raise ValueError("span entries must be objects")
    for key in _ID_FIELDS:
        value = obj.get(key)
        if not isinstance(value, str) or not value:
            continue
        try:
            raw = bytes.fromhex(value)
        except ValueError:
            raise ValueError(f"{key} {value[:40]!r} is not hex (OTLP/JSON ids are hex strings)") from None
        obj[key] = base64.b64encode(raw).decode("ascii")


def receive(body: bytes, content_type: str | None, content_encoding: str | None, max_bytes: int) -> tuple[bytes, str]:
    """Media type, size and decompression of a request body. Returns (decompressed body, media type)."""
    mt = media_type(content_type)
    if len(body) > max_bytes:
        raise OtlpError(413, f"request body of {len(body)} bytes exceeds {max_bytes} (RAGTRACE_MAX_BODY_BYTES)")
    return decompress(body, content_encoding, max_bytes), mt


def decode(body: bytes, content_type: str | None, content_encoding: str | None,
           max_bytes: int) -> tuple[ExportTraceServiceRequest, str]:
    """The whole receive path: media type, size, decompression, parse. Returns (message, media type)."""
    raw, mt = receive(body, content_type, content_encoding, max_bytes)
    return parse_request(raw, mt), mt


def encode_response(mt: str, rejected_spans: int = 0, error_message: str = "") -> bytes:
    """The `ExportTraceServiceResponse` in the request's encoding (partial_success only when needed)."""
    resp = ExportTraceServiceResponse()
    if rejected_spans or error_message:
        resp.partial_success.rejected_spans = rejected_spans
        resp.partial_success.error_message = error_message
    if mt == PROTOBUF:
        return resp.SerializeToString()
    return orjson.dumps(json_format.MessageToDict(resp))


def encode_status(mt: str, code: int, message: str) -> bytes:
    """A `google.rpc.Status`-shaped error body (OTLP/HTTP failure responses)."""
    if mt == PROTOBUF:
        # google.rpc.Status: code = 1 (int32), message = 2 (string). Encoded by hand because
        # googleapis-common-protos is not a dependency; the two fields are trivially stable.
        msg = message.encode("utf-8", "replace")
        return b"\x08" + _varint(code) + b"\x12" + _varint(len(msg)) + msg
    return orjson.dumps({"code": code, "message": message})


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)
