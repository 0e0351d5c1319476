"""Passage text cannot be replaced through an unverified content hash.

The store keeps one text per (tenant, content hash), the longest. Before, the hash a span claimed
was not checked: a longer text sent first under someone's hash was what their trace showed later.
Now a claimed hash must be the sha256 of the text sent with it (as the SDK computes it), or the
span is rejected with the reason; under ``ragtrace.content.mode = truncate:N`` a text that does not
hash to its claim (a prefix) is stored under its own hash. Attacks against a real `ragtrace serve`
app on loopback, through both OTLP encodings, and the walk's rows for mismatched hashes.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from ragtrace import semconv as sc
from ragtrace_collector.assemble import assemble
from ragtrace_collector.spans import HASH_MISMATCH
from tests import otlp_builders as T
from tests.collector._server import running
from tests.collector.test_native_walk import _request, _span, check_rows, documents
from tests.collector.test_otlp import _otlp_json

VICTIM_TEXT = "Water boils at 100 degrees Celsius at sea level."
FAKE_TEXT = "Water boils at 50 degrees Celsius. " * 20  # longer: under the old rule it would win


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _doc(rank: int, field: str) -> str:
    return sc.document_attribute(sc.RETRIEVAL_DOCUMENTS, rank, field)


def _retrieval(trace_id: str, text: str, claimed: str, **extra: Any) -> T.SpanSpec:
    attrs = {sc.SPAN_KIND: "RETRIEVER", sc.INPUT_VALUE: "q", _doc(0, sc.DOCUMENT_ID): "boil",
             _doc(0, sc.DOCUMENT_CONTENT): text, _doc(0, sc.DOCUMENT_CONTENT_HASH): claimed, **extra}
    return T.SpanSpec(trace_id, os.urandom(8).hex(), "retrieve", attrs)


def _root(trace_id: str) -> T.SpanSpec:
    return T.SpanSpec(trace_id, os.urandom(8).hex(), "answer",
                      {sc.SPAN_KIND: "CHAIN", sc.INPUT_VALUE: "when does water boil?", sc.OUTPUT_VALUE: "at 100"})


def _send(url: str, spans: list[T.SpanSpec], token: str, *, as_json: bool) -> ExportTraceServiceResponse:
    req = T.request(spans)
    ctype = "application/json" if as_json else "application/x-protobuf"
    r = httpx.post(f"{url}/v1/traces", content=_otlp_json(req) if as_json else req.SerializeToString(),
                   headers={"content-type": ctype, "authorization": f"Bearer {token}"}, timeout=30)
    assert r.status_code == 200, r.text
    if as_json:
        body = r.json()
        out = ExportTraceServiceResponse()
        partial = body.get("partialSuccess") or {}
        out.partial_success.rejected_spans = int(partial.get("rejectedSpans", 0))
        out.partial_success.error_message = partial.get("errorMessage", "")
        return out
    return ExportTraceServiceResponse.FromString(r.content)


@pytest.mark.parametrize("as_json", [False, True], ids=["protobuf", "json"])
def test_a_text_under_someone_elses_hash_is_rejected(chdb_store: Any, tmp_path: Path, as_json: bool) -> None:
    tenant = f"ch-{uuid.uuid4().hex[:8]}"
    victim_hash = _sha(VICTIM_TEXT + tenant)  # unique per test run
    victim_text = VICTIM_TEXT + tenant
    attacker, victim = os.urandom(16).hex(), os.urandom(16).hex()
    with running(chdb_store, str(tmp_path / "spool"), tokens={"tok": tenant}) as (url, app):
        first = _send(url, [_root(attacker), _retrieval(attacker, FAKE_TEXT, victim_hash)], "tok", as_json=as_json)
        assert first.partial_success.rejected_spans == 1
        assert HASH_MISMATCH in first.partial_success.error_message
        later = _send(url, [_root(victim), _retrieval(victim, victim_text, victim_hash)], "tok", as_json=as_json)
        assert later.partial_success.rejected_spans == 0, later.partial_success.error_message
        assert app.state.writer.flush(30)
    (rec,) = chdb_store.read_traces(tenant=tenant, trace_ids=[victim], with_content=True)
    assert [(d.id, d.content) for d in rec.retrieved] == [("boil", victim_text)]
    stored = chdb_store.query_rows(f"SELECT content FROM {chdb_store.table('passages')} "
                                   "WHERE tenant = {t:String}", {"t": tenant})
    assert stored == [(victim_text,)], "the fake text reached the store"


def test_a_fake_prefix_cannot_replace_the_full_text(chdb_store: Any, tmp_path: Path) -> None:
    # "truncate:N" says texts may be prefixes of what their hash names, so a mismatch is not an
    # error there; what arrived is kept under its own hash and can replace nothing
    tenant = f"ch-{uuid.uuid4().hex[:8]}"
    victim_text = VICTIM_TEXT + tenant
    victim_hash = _sha(victim_text)
    attacker, victim = os.urandom(16).hex(), os.urandom(16).hex()
    with running(chdb_store, str(tmp_path / "spool"), tokens={"tok": tenant}) as (url, app):
        sent = _send(url, [_root(attacker), _retrieval(attacker, FAKE_TEXT, victim_hash,
                                                       **{sc.CONTENT_MODE: "truncate:100000"})], "tok", as_json=False)
        assert sent.partial_success.rejected_spans == 0
        _send(url, [_root(victim), _retrieval(victim, victim_text, victim_hash)], "tok", as_json=False)
        assert app.state.writer.flush(30)
    got = {r.trace_id: r for r in chdb_store.read_traces(tenant=tenant, with_content=True)}
    assert [d.content for d in got[victim].retrieved] == [victim_text]
    assert got[victim].retrieved[0].content_hash == victim_hash
    # the "prefix" is its sender's, under the hash of what was sent, marked truncated
    assert [(d.content, d.content_hash) for d in got[attacker].retrieved] == [(FAKE_TEXT, _sha(FAKE_TEXT))]
    rows = chdb_store.query_rows(f"SELECT content_hash, truncated FROM {chdb_store.table('passages')} FINAL "
                                 "WHERE tenant = {t:String} ORDER BY content_hash", {"t": tenant})
    assert sorted(rows) == sorted([(victim_hash, False), (_sha(FAKE_TEXT), True)])


def test_a_hash_is_computed_when_none_is_sent(chdb_store: Any, tmp_path: Path) -> None:
    tenant = f"ch-{uuid.uuid4().hex[:8]}"
    tid = os.urandom(16).hex()
    text = f"élan vital ✓ {tenant}"
    span = T.SpanSpec(tid, os.urandom(8).hex(), "retrieve", {sc.SPAN_KIND: "RETRIEVER",
                                                               _doc(0, sc.DOCUMENT_ID): "x",
                                                               _doc(0, sc.DOCUMENT_CONTENT): text})
    with running(chdb_store, str(tmp_path / "spool"), tokens={"tok": tenant}) as (url, app):
        assert _send(url, [_root(tid), span], "tok", as_json=False).partial_success.rejected_spans == 0
        assert app.state.writer.flush(30)
    (rec,) = chdb_store.read_traces(tenant=tenant, with_content=True)
    assert [(d.content, d.content_hash) for d in rec.retrieved] == [(text, _sha(text))]


SDK_PROGRAM = """
import ragtrace
ragtrace.configure(service="hash-check", release="r", content=CONTENT)
PASSAGES = {"boil": "Wasser kocht bei 100 °C auf Meereshöhe — 🌊 " * 3, "freeze": "Eis schmilzt bei 0 °C."}

@ragtrace.retriever
def search(query):
    return [{"id": i, "content": t} for i, t in PASSAGES.items()]

@ragtrace.generator(model="echo")
def generate(query, context):
    return context[0]["content"]

@ragtrace.pipeline
def answer(query):
    return generate(query, search(query))

answer("wann kocht Wasser?")
ragtrace.shutdown()
print(ragtrace.stats())
"""


@pytest.mark.parametrize("content", ["full", "truncate:12", "hash"])
def test_what_the_sdk_sends_is_accepted(chdb_store: Any, tmp_path: Path, content: str) -> None:
    # the collector checks with exactly the SDK's hash (ragtrace._flatten): its spans are never refused
    tenant = f"ch-{uuid.uuid4().hex[:8]}"
    with running(chdb_store, str(tmp_path / "spool"), tokens={"tok": tenant}) as (url, app):
        env = {**os.environ, "RAGTRACE_ENDPOINT": url, "RAGTRACE_HEADERS": "authorization=Bearer tok"}
        proc = subprocess.run([sys.executable, "-c", SDK_PROGRAM.replace("CONTENT", repr(content))],
                              capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert app.state.writer.flush(30)
        assert app.state.metrics.get("ragtrace_spans_rejected_total") == 0
    assert "spans_exported=3" in proc.stdout, proc.stdout
    (rec,) = chdb_store.read_traces(tenant=tenant, with_content=True)
    boil = "Wasser kocht bei 100 °C auf Meereshöhe — 🌊 " * 3
    texts = [d.content for d in rec.retrieved]
    if content == "full":
        assert texts == [boil, "Eis schmilzt bei 0 °C."]
        assert rec.retrieved[0].content_hash == _sha(boil)
    elif content == "truncate:12":
        assert texts == [boil[:12], "Eis schmilzt"]
    else:
        assert texts == [None, None] and rec.retrieved[0].content_hash == _sha(boil)


def test_spans_with_mismatched_hashes_are_rejected_and_the_rest_stored() -> None:
    good, bad = "the real passage", "a different passage"
    ok_hash, other_hash = _sha(good), _sha("something else")
    cases = [
        # the SDK's shape (every field of every document), one hash wrong
        {_doc(0, sc.DOCUMENT_ID): "a", _doc(0, sc.DOCUMENT_CONTENT): good, _doc(0, sc.DOCUMENT_CONTENT_HASH): ok_hash,
         _doc(1, sc.DOCUMENT_ID): "b", _doc(1, sc.DOCUMENT_CONTENT): bad, _doc(1, sc.DOCUMENT_CONTENT_HASH): ok_hash},
        # a sparse span with a wrong hash
        {_doc(3, sc.DOCUMENT_CONTENT): bad, _doc(3, sc.DOCUMENT_CONTENT_HASH): other_hash},
        # right hashes, and a hash without text (nothing to check)
        {_doc(0, sc.DOCUMENT_ID): "a", _doc(0, sc.DOCUMENT_CONTENT): good, _doc(0, sc.DOCUMENT_CONTENT_HASH): ok_hash,
         _doc(1, sc.DOCUMENT_ID): "c", _doc(1, sc.DOCUMENT_CONTENT_HASH): other_hash},
        # truncation: a mismatch is a prefix, kept under its own hash
        {sc.CONTENT_MODE: "truncate:5", _doc(0, sc.DOCUMENT_ID): "a", _doc(0, sc.DOCUMENT_CONTENT): bad,
         _doc(0, sc.DOCUMENT_CONTENT_HASH): ok_hash},
    ]
    spans = [_span(attrs, span=bytes([i + 1]) * 8) for i, attrs in enumerate(cases)]
    # a later span of the same request repeating a checked hash with other text is refused too
    spans.append(_span({_doc(0, sc.DOCUMENT_ID): "z", _doc(0, sc.DOCUMENT_CONTENT): bad,
                        _doc(0, sc.DOCUMENT_CONTENT_HASH): ok_hash}, span=b"\x09" * 8))
    req = _request(*spans)
    got = assemble(req, "t1", 1_700_000_000_000)
    assert got.rejected == 3 and got.messages == [HASH_MISMATCH]
    passages = dict(zip(got.cols["passages"]["content_hash"], got.cols["passages"]["content"], strict=True))
    assert passages == {ok_hash: good, _sha(bad): bad}
    # the third span whole; the fourth's prefix under its own hash, its claimed one replaced
    assert [d[1:6] for d in documents(got)] == [
        ("retrieved", 0, "a", None, ok_hash), ("retrieved", 1, "c", None, other_hash),
        ("retrieved", 0, "a", None, _sha(bad))]
    check_rows(req, None)  # as the plain recomputation of tests/collector/test_native_walk.py says
