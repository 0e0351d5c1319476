"""The SDK exporting over OTLP/HTTP to the collector's real app on loopback, into the real engine:
what a service hands the SDK is what the store holds."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import ragtrace
from tests.collector._server import running


def _stored(store: Any, release: str, n: int, timeout: float = 30.0) -> dict[str, Any]:
    """The release's traces by query, once ``n`` have arrived."""
    deadline = time.monotonic() + timeout
    while True:
        assert ragtrace.force_flush(10)
        got = {r.query: r for r in store.read_traces(release=release)}
        if len(got) >= n or time.monotonic() > deadline:
            return got
        # the collector writes in batches (about a second); poll the real store until it holds them
        time.sleep(0.1)


def test_a_single_gold_id_string_is_one_id_not_its_characters(chdb_store: Any, tmp_path: Path) -> None:
    release = f"gold-str-{uuid.uuid4().hex[:8]}"

    @ragtrace.retriever
    def search(query: str) -> list[dict[str, str]]:
        return [{"id": "doc-9", "text": "the passage"}]

    @ragtrace.pipeline
    def answer(query: str, query_id: str | None = None, gold_ids: Any = None) -> str:
        search(query)
        if query == "set":
            ragtrace.set_gold_ids("doc-8")
        return "an answer"

    with running(chdb_store, str(tmp_path / "spool")) as (url, app):
        ragtrace.configure(endpoint=url, service="svc", release=release, schedule_delay_ms=50)
        answer("kwarg", gold_ids="doc-9")
        answer("set")
        with ragtrace.trace_query("explicit", gold_ids="doc-7") as q:
            q.retrieved([{"id": "doc-7", "text": "t"}])
        with ragtrace.trace_query("explicit-gold") as q:
            q.retrieved([{"id": "doc-6", "text": "t"}])
            q.gold("doc-6")
        with ragtrace.trace_query("attached", query_id=f"{release}-q") as q:
            q.retrieved([{"id": "doc-5", "text": "t"}])
        assert ragtrace.attach_gold("doc-5", query_id=f"{release}-q")
        _stored(chdb_store, release, 5)
        assert app.state.writer.flush(30)
        got = _stored(chdb_store, release, 5)
    # each was stored as the id's characters, ('d', 'o', 'c', '-', '9'), none of them a document
    assert got["kwarg"].gold_ids == ("doc-9",)
    assert got["set"].gold_ids == ("doc-8",)
    assert got["explicit"].gold_ids == ("doc-7",)
    assert got["explicit-gold"].gold_ids == ("doc-6",)
    assert got["attached"].gold_ids == ("doc-5",)


def _big(n: int) -> list[dict[str, str]]:
    return [{"id": f"big-{i}", "text": f"passage {i} " + "x" * 40_000} for i in range(n)]


def test_a_span_too_large_for_the_collector_loses_only_itself(chdb_store: Any, tmp_path: Path,
                                                              caplog: Any) -> None:
    release = f"too-large-{uuid.uuid4().hex[:8]}"

    @ragtrace.retriever
    def search(query: str) -> list[dict[str, str]]:
        return _big(10) if query == "big" else [{"id": "small-0", "text": "a small passage"}]

    @ragtrace.generator
    def generate(prompt: str, context: list[dict[str, str]]) -> str:
        return "an answer"

    @ragtrace.pipeline
    def answer(query: str) -> str:
        return generate(query, search(query)[:1])

    limit = 200_000  # the big retriever span alone is ~400 kB; everything else is small
    with running(chdb_store, str(tmp_path / "spool"), max_body_bytes=limit,
                 max_inflight_bytes=4 * limit) as (url, app):
        # one batch holding both queries, as a busy service's export would
        ragtrace.configure(endpoint=url, service="svc", release=release, schedule_delay_ms=60_000)
        for query in ("small-a", "big", "small-b"):
            answer(query)
        assert ragtrace.force_flush(20)
        stats = ragtrace.stats()
        assert app.state.writer.flush(30)
        got = _stored(chdb_store, release, 3)
    # before: the whole batch was refused (413) and dropped, the small queries with it
    assert stats.dropped_export_failed == 1 and stats.spans_exported == 8
    assert set(got) == {"small-a", "big", "small-b"}
    for query in ("small-a", "small-b"):
        assert got[query].complete and [d.id for d in got[query].retrieved] == ["small-0"]
    # the big query's root and generation arrived, its retrieval did not
    assert got["big"].retrieved == () and [d.id for d in got["big"].context] == ["big-0"]
    logged = "\n".join(r.getMessage() for r in caplog.records if r.name == "ragtrace")
    assert "search': alone it is" in logged and f"exceeds {limit} (RAGTRACE_MAX_BODY_BYTES)" in logged


def test_a_refusal_warns_with_the_collectors_reason_not_its_status_bytes(chdb_store: Any, tmp_path: Path,
                                                                         caplog: Any) -> None:
    @ragtrace.pipeline
    def answer(query: str) -> str:
        return "an answer"

    with running(chdb_store, str(tmp_path / "spool"), tokens={"right": "t"}) as (url, _app):
        ragtrace.configure(endpoint=url, service="svc", headers={"authorization": "Bearer wrong"})
        answer("q")
        ragtrace.force_flush(10)
    (warning,) = [r.getMessage() for r in caplog.records
                  if r.name == "ragtrace" and "cannot export spans to" in r.getMessage()]
    # the google.rpc.Status body's message, not its protobuf bytes ('\x08\x91\x03\x12...')
    assert "(HTTP 401: unknown bearer token" in warning and "\x08" not in warning
    # the collector answered: it is listening, and a 401 is not retried
    assert "listening there" not in warning and "Retrying" not in warning and "Not retried" in warning


def test_a_value_the_wire_cannot_carry_is_left_out_not_the_batch(chdb_store: Any, tmp_path: Path) -> None:
    release = f"odd-values-{uuid.uuid4().hex[:8]}"
    model: Any = 42  # a model given as a number
    passages = [{"id": "p0", "text": "first"}, {"id": "p1", "text": "second"}]

    @ragtrace.retriever
    def search(query: str) -> list[dict[str, str]]:
        return passages

    @ragtrace.generator(model=model)
    def generate(prompt: str, context: list[dict[str, str]]) -> str:
        return "an answer"

    @ragtrace.pipeline
    def answer(query: str) -> str:
        if query == "big":
            ragtrace.set_attribute("app.request_number", 2**70)  # beyond OTLP's 64-bit int
        return generate(query, search(query))

    def redact(text: str) -> str:
        return None if "secret" in text else text  # type: ignore[return-value]  # a redactor's bug

    with running(chdb_store, str(tmp_path / "spool")) as (url, app):
        ragtrace.configure(endpoint=url, service="svc", release=release, redact=redact, schedule_delay_ms=60_000)
        for query in ("plain", "big", "a secret"):
            answer(query)
        with ragtrace.trace_query("explicit") as q:
            q.retrieved(passages)
            q.reranked(passages[:1], top_k="1")  # type: ignore[arg-type]  # a top_k given as text
        assert ragtrace.force_flush(20)
        stats = ragtrace.stats()
        assert app.state.writer.flush(30)
        stored = {r.trace_id: r for r in chdb_store.read_traces(release=release)}
    # before: the one export request holding all 12 spans failed to encode (TypeError) or was refused
    # as corrupt protobuf (the int's varint), and every query of it was dropped
    assert stats.dropped_export_failed == 0 and stats.spans_exported == 12
    got = {r.query: r for r in stored.values()}
    assert set(got) == {"plain", "big", "", "explicit"}  # the secret query's text was left out
    assert all(len(r.retrieved) == 2 for r in got.values())
    rows = chdb_store.query_rows(
        f"SELECT attributes FROM {chdb_store.table('spans')} "
        "WHERE trace_id = {t:String} AND endsWith(name, '.answer')",
        {"t": got["big"].trace_id})
    assert '"app.request_number":"1180591620717411303424"' in rows[0][0]


def test_a_lone_surrogate_in_a_text_does_not_corrupt_the_request(chdb_store: Any, tmp_path: Path) -> None:
    release = f"surrogate-{uuid.uuid4().hex[:8]}"
    broken = "caf\udce9 menu"  # bytes b"caf\xe9" read with errors="surrogateescape"

    @ragtrace.retriever
    def search(query: str) -> list[dict[str, str]]:
        return [{"id": "p0", "text": f"passage about {query}"}]

    @ragtrace.pipeline
    def answer(query: str) -> str:
        search(query)
        ragtrace.set_attribute(f"app.{query}", 1)
        return f"answer about {query}"

    with running(chdb_store, str(tmp_path / "spool")) as (url, app):
        ragtrace.configure(endpoint=url, service="svc", release=release, schedule_delay_ms=60_000)
        answer("plain")
        answer(broken)
        assert ragtrace.force_flush(20)
        stats = ragtrace.stats()
        assert app.state.writer.flush(30)
        got = {r.query: r for r in chdb_store.read_traces(release=release, with_content=True)}
    # before: sent as invalid UTF-8 the collector refused the request (400) and both queries were lost
    assert stats.dropped_export_failed == 0 and stats.spans_exported == 4
    assert set(got) == {"plain", "caf? menu"}
    # the passage's content hash is of the text as sent, so the collector's check accepts it
    (doc,) = got["caf? menu"].retrieved
    assert doc.id == "p0" and doc.content == "passage about caf? menu"


def test_passage_text_given_as_bytes_is_its_text(chdb_store: Any, tmp_path: Path) -> None:
    release = f"bytes-{uuid.uuid4().hex[:8]}"

    @ragtrace.retriever
    def search(query: str) -> list[Any]:
        # what a store client returning raw values hands back
        return [{"id": "d0", "text": "caf\u00e9 au lait".encode()}, ("d1", b"second passage"), b"third passage"]

    @ragtrace.pipeline
    def answer(query: str) -> str:
        search(query)
        return "an answer"

    with running(chdb_store, str(tmp_path / "spool")) as (url, app):
        ragtrace.configure(endpoint=url, service="svc", release=release, schedule_delay_ms=50)
        answer("q")
        _stored(chdb_store, release, 1)
        assert app.state.writer.flush(30)
        (rec,) = chdb_store.read_traces(release=release, with_content=True)
    # before: "b'caf\\xc3\\xa9 au lait'" (the bytes' repr), and the tuple and bare bytes were no document
    assert [d.content for d in rec.retrieved] == ["caf\u00e9 au lait", "second passage", "third passage"]
    assert [d.id for d in rec.retrieved][:2] == ["d0", "d1"]
