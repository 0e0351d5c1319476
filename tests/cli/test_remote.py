"""`ragtrace_cli.remote`: the one HTTP client of the ``--server`` commands, against the `ragtrace serve`
app (collector, audit API, review API) under a real uvicorn server on loopback."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.responses import PlainTextResponse

from ragtrace_cli.commands.audit import _remote_audit, audit_main
from ragtrace_cli.commands.review import review_main, reviewers_main
from ragtrace_cli.commands.traces import traces_main
from ragtrace_cli.remote import EXCERPT_CHARS, RemoteClient, RemoteError
from tests import otlp_builders as T
from tests.collector._server import running

TOKEN = "remote-tok"
RELEASE = "r-remote"


@pytest.fixture(scope="module")
def served(chdb_store: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[str]]]:
    """(base URL, trace ids): the serve app with one tenant token and three stored traces, plus a
    route that fails with a long plain-text body (the real routes' 5xx need a broken store)."""
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    docs = T.corpus(30, size=120)
    traces = [T.standard_trace(docs, i) for i in range(3)]
    with running(chdb_store, str(tmp_path_factory.mktemp("spool")), tokens={TOKEN: tenant}) as (url, app):
        app.add_api_route("/test/broken", lambda: PlainTextResponse("x" * 2000, status_code=503))
        body = T.request([s for t in traces for s in t.spans()], release=RELEASE).SerializeToString()
        resp = httpx.post(f"{url}/v1/traces", content=body, timeout=30,
                          headers={"content-type": "application/x-protobuf", "authorization": f"Bearer {TOKEN}"})
        assert resp.status_code == 200
        assert app.state.writer.flush(30)
        yield url, [t.trace_id for t in traces]


def test_json_and_ndjson_answers(served: tuple[str, list[str]]) -> None:
    url, ids = served
    with RemoteClient(url + "/", token=TOKEN, timeout=30) as remote:  # a trailing slash is fine
        listed = remote.get("/api/traces", {"release": RELEASE, "limit": 10})  # NDJSON: one object a line
        shown = remote.get(f"/api/traces/{ids[0]}")  # JSON
        ready = remote.get("/readyz")
    assert isinstance(listed, list) and {o["trace_id"] for o in listed} == set(ids)
    assert shown["trace_id"] == ids[0] and shown["release"] == RELEASE
    assert ready["ready"] is True


def test_401_says_pass_the_token(served: tuple[str, list[str]]) -> None:
    url, _ = served
    for token in (None, "wrong"):
        with RemoteClient(url, token=token) as remote, pytest.raises(RemoteError) as exc:
            remote.get("/api/traces")
        err = exc.value
        assert err.status == 401 and err.url == url + "/api/traces"
        assert f"the collector at {url} answered 401 (pass --token TOKEN): " in str(err)
        assert "bearer token" in err.detail  # the server's own reason
    with RemoteClient(url, token_hint="give --token or set $RAGTRACE_TOKEN") as remote, \
            pytest.raises(RemoteError, match=r"answered 401 \(give --token or set \$RAGTRACE_TOKEN\)"):
        remote.post_json("/api/audit", {})


def test_4xx_and_5xx_carry_the_body(served: tuple[str, list[str]]) -> None:
    url, _ = served
    with RemoteClient(url, token=TOKEN) as remote:
        with pytest.raises(RemoteError) as exc:
            remote.get("/api/traces/0123456789abcdef0123456789abcdef")
        assert exc.value.status == 404
        assert str(exc.value).startswith(f"the collector at {url} answered 404: no trace 0123456789abcdef")
        with pytest.raises(RemoteError) as exc:
            remote.post_json("/api/audit", {"no_such_option": 1}, hints={404: "not this one"})
        assert exc.value.status == 400 and "invalid audit options" in exc.value.detail
        assert "not this one" not in str(exc.value)
        with pytest.raises(RemoteError) as exc:
            remote.get("/test/broken", hints={503: "try again later"})
        assert exc.value.status == 503
        assert f"answered 503 (try again later): {'x' * EXCERPT_CHARS}…" in str(exc.value)
        assert len(str(exc.value)) < EXCERPT_CHARS + 200  # an excerpt, not the whole body


def test_unreachable_port() -> None:
    url = f"http://127.0.0.1:{T.free_port()}"
    with RemoteClient(url, timeout=5) as remote, pytest.raises(RemoteError) as exc:
        remote.get("/api/traces")
    assert exc.value.status is None
    assert str(exc.value).startswith(f"cannot reach the collector at {url}: ")
    assert "Is `ragtrace serve` running there?" in str(exc.value)


@pytest.mark.parametrize("url", ["localhost:4318", "127.0.0.1:4318", "ftp://host/", "grpc://127.0.0.1:4317",
                                 "http://", "http://127.0.0.1:43l8"])
@pytest.mark.parametrize("command", ["traces", "audit", "review status", "reviewers list"])
def test_a_server_that_is_not_an_http_url_says_what_to_give(url: str, command: str,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    if "43l8" not in url:  # the client refuses the rest itself too (it is a library as well)
        with pytest.raises(RemoteError) as exc:
            RemoteClient(url)
        assert exc.value.status is None and "give http://HOST:PORT" in str(exc.value)
    main = {"traces": traces_main, "audit": audit_main, "review status": review_main, "reviewers list": reviewers_main}
    # a usage error (exit 2) before anything is asked, not a connection failure (exit 1)
    with pytest.raises(SystemExit) as stop:
        main[command]([*command.split()[1:], "--server", url, "--token", "t"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert f"{url!r}" in err and "give http://HOST:PORT" in err and "unsupported protocol" not in err


def test_commands_report_through_it(served: tuple[str, list[str]], tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    url, ids = served
    assert traces_main(["--server", url, "--token", TOKEN, "--release", RELEASE, "--json"]) == 0
    assert {json.loads(line)["trace_id"] for line in capsys.readouterr().out.splitlines()} == set(ids)
    assert traces_main(["show", ids[1], "--server", url, "--token", TOKEN, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["trace_id"] == ids[1]
    assert traces_main(["--server", url, "--token", "wrong"]) == 1
    assert "ragtrace traces: the collector at" in (err := capsys.readouterr().err) and "answered 401" in err
    assert traces_main(["--server", f"http://127.0.0.1:{T.free_port()}"]) == 1
    assert "ragtrace traces: cannot reach the collector at" in capsys.readouterr().err
    # audit: a refused option is a usage error (2), a refused token is not (1)
    assert _remote_audit(url, {"no_such_option": 1}, token=TOKEN, want_records=False, timeout=30) == (2, {})
    assert "ragtrace audit: the collector at" in (err := capsys.readouterr().err) and "answered 400" in err
    assert _remote_audit(url, {}, token="wrong", want_records=False, timeout=30) == (1, {})
    assert "answered 401 (give --token or set $RAGTRACE_TOKEN)" in capsys.readouterr().err
