"""The OTLP/HTTP decoding layer: media types, compression, limits, the JSON id mapping."""

from __future__ import annotations

import base64
import gzip

import orjson
import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from ragtrace_collector.otlp import JSON, PROTOBUF, OtlpError, decode, encode_response, encode_status
from tests import otlp_builders as T


def _otlp_json(req) -> bytes:  # type: ignore[no-untyped-def]
    """OTLP/JSON as an exporter writes it: protobuf JSON mapping, but ids in hex."""
    d = json_format.MessageToDict(req)
    for rs in d["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for sp in ss["spans"]:
                for k in ("traceId", "spanId", "parentSpanId"):
                    if k in sp:
                        sp[k] = base64.b64decode(sp[k]).hex()
    return orjson.dumps(d)


def test_protobuf_json_and_gzip_decode_to_the_same_message() -> None:
    req = T.request(T.TraceSpec(retrieved=[T.Doc("a", "text a", 0.5)], reranked=[T.Doc("a", "text a", 0.9)]).spans())
    pb = req.SerializeToString()
    m1, mt1 = decode(pb, "application/x-protobuf", None, 1 << 20)
    m2, mt2 = decode(gzip.compress(pb), "application/x-protobuf; charset=x", "gzip", 1 << 20)
    m3, mt3 = decode(_otlp_json(req), "application/json", None, 1 << 20)
    assert (mt1, mt2, mt3) == (PROTOBUF, PROTOBUF, JSON)
    assert m1 == req and m2 == req and m3 == req


@pytest.mark.parametrize("ctype", ["text/plain", None, "application/grpc", ""])
def test_other_media_types_are_415(ctype: str | None) -> None:
    with pytest.raises(OtlpError) as e:
        decode(b"", ctype, None, 100)
    assert e.value.status == 415 and "application/x-protobuf" in e.value.reason


def test_size_limits_apply_before_and_after_decompression() -> None:
    with pytest.raises(OtlpError) as e:
        decode(b"x" * 101, PROTOBUF, None, 100)
    assert e.value.status == 413
    bomb = gzip.compress(b"\0" * 10_000)  # small on the wire, large decoded
    assert len(bomb) < 100
    with pytest.raises(OtlpError) as e:
        decode(bomb, PROTOBUF, "gzip", 1000)
    assert e.value.status == 413


@pytest.mark.parametrize(("body", "ctype", "enc", "needle"), [
    (b"\x0a\x05\x12\x03\x0a\x01", PROTOBUF, None, "malformed OTLP protobuf"),
    (b"not gzip", PROTOBUF, "gzip", "gzip"),
    (gzip.compress(b"abc", mtime=0)[:-6], PROTOBUF, "gzip", "truncated"),  # mtime=0: the same test id in every process
    (b"{", JSON, None, "malformed JSON"),
    (b"[1, 2]", JSON, None, "object"),
    (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}', JSON, None, "hex"),
    (b'{"resourceSpans": 5}', JSON, None, "array"),
    (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": 5}]}]}]}', JSON, None, "malformed OTLP JSON"),
    (b"\xff\xfe", JSON, None, "malformed JSON"),
])
def test_malformed_bodies_are_400_with_a_reason(body: bytes, ctype: str, enc: str | None, needle: str) -> None:
    with pytest.raises(OtlpError) as e:
        decode(body, ctype, enc, 1 << 20)
    assert e.value.status == 400
    assert needle in e.value.reason


def test_unknown_json_fields_are_ignored() -> None:
    body = b'{"resourceSpans": [{"futureField": 1, "scopeSpans": []}], "other": true}'
    msg, _ = decode(body, JSON, None, 1 << 20)
    assert len(msg.resource_spans) == 1


def test_unsupported_encoding_is_415() -> None:
    with pytest.raises(OtlpError) as e:
        decode(b"abc", PROTOBUF, "br", 100)
    assert e.value.status == 415


def test_response_bodies() -> None:
    resp = ExportTraceServiceResponse()
    resp.ParseFromString(encode_response(PROTOBUF, 2, "bad ids"))
    assert resp.partial_success.rejected_spans == 2 and resp.partial_success.error_message == "bad ids"
    assert encode_response(PROTOBUF) == b""
    assert orjson.loads(encode_response(JSON, 1, "x")) == {"partialSuccess": {"rejectedSpans": "1",
                                                                               "errorMessage": "x"}}
    assert orjson.loads(encode_status(JSON, 400, "why")) == {"code": 400, "message": "why"}
    # google.rpc.Status wire format: field 1 varint, field 2 string
    assert encode_status(PROTOBUF, 400, "why") == b"\x08\x90\x03\x12\x03why"
