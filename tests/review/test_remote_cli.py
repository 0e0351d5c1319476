"""`ragtrace review ... --server URL`: the commands through a running server's review API (the way
to reach an embedded store that `ragtrace serve` owns)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from ragtrace_cli.commands.review import review_main
from ragtrace_review import auth
from ragtrace_review.queues import list_items, next_item, record_decision
from ragtrace_store import Store

Seeder = Callable[..., list[dict[str, Any]]]


def test_enqueue_status_agreement_export_through_the_server(
        store: Store, tenant: str, seeded: Seeder, live_url: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    seeded(["fabrication", "ok", "under_use"])
    ann, token = auth.add_reviewer(store, "ann", tenant=tenant)
    remote = ["--server", live_url, "--token", token]
    assert review_main(["enqueue", "--queue", "remote", "--per-mode", "5", "--reviewers", "1", *remote]) == 0
    assert "added 3 of 3 labelled traces" in capsys.readouterr().out
    assert len(list_items(store, tenant=tenant, queue="remote")) == 3  # in the reviewer's tenant
    while (t := next_item(store, ann, "remote")) is not None:
        record_decision(store, ann, "remote", t, failure_mode="ok", claims=["entailed", "neutral"],
                        relevance={"d1": True, "d2": False})
    assert review_main(["status", *remote]) == 0
    assert "remote: 3/3 decisions, 3 of 3 items complete, K=1; ann 3" in capsys.readouterr().out
    assert review_main(["agreement", "--queue", "remote", "--json", *remote]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["labeller"]["m-test"]["failure_mode"]["accuracy"]["k"] == 1  # only the "ok" item
    assert review_main(["agreement", "--queue", "remote", *remote]) == 0
    assert "labeller (manifest m-test)" in capsys.readouterr().out
    out = tmp_path / "gold"
    assert review_main(["export", "--queue", "remote", "--out", str(out), "--to-store", *remote]) == 0
    # what was stored is said, as with --store (before, --server said nothing of the store)
    assert "; stored 6 gold rows" in capsys.readouterr().out
    assert len((out / "reviews.jsonl").read_text().splitlines()) == 3
    assert len((out / "qrels.txt").read_text().splitlines()) == 6
    n_gold = store.query_rows(f"SELECT count() FROM {store.table('gold')} FINAL WHERE tenant = {{t:String}} "
                              "AND source = 'review'", {"t": tenant})[0][0]
    assert n_gold == 6


def test_remote_errors(store: Store, tenant: str, live_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert review_main(["status", "--server", live_url, "--token", "rtr_wrong"]) == 1
    assert "answered 401" in capsys.readouterr().err
    _, token = auth.add_reviewer(store, "bo", tenant=tenant)
    assert review_main(["agreement", "--queue", "missing", "--server", live_url, "--token", token]) == 1
    assert "no queue 'missing'" in capsys.readouterr().err
    assert review_main(["enqueue", "--queue", "q", "--server", live_url, "--token", token]) == 1
    assert "has no labels yet" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        review_main(["status", "--server", live_url])  # no token
    assert exc.value.code == 2


def test_api_writes_refuse_browser_sessions(store: Store, tenant: str, live_url: str) -> None:
    import re

    _, token = auth.add_reviewer(store, "cy", tenant=tenant)
    with httpx.Client(base_url=live_url, follow_redirects=False) as client:
        page = client.get("/review/login")
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
        assert csrf
        r = client.post("/review/login", data={"token": token, "csrf_token": csrf.group(1)})
        assert r.status_code == 303
        # the cookie session can read the API but not write through it (no CSRF token on JSON calls)
        assert client.get("/review/api/queues").status_code == 200
        r = client.post("/review/api/queues/x/enqueue", json={"per_mode": 1})
        assert r.status_code == 403 and "Bearer" in r.json()["error"]
        r = client.post("/review/api/queues/x/enqueue", json={"bogus": 1},
                        headers={"authorization": f"Bearer {token}"})
        assert r.status_code == 400 and "unknown options" in r.json()["error"]


def test_reviewer_admin_api_uses_the_tenant_tokens(store: Store, tenant: str) -> None:
    from types import SimpleNamespace

    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from ragtrace_review.web import mount

    app = FastAPI()
    mount(app, lambda: store, SimpleNamespace(review_secret="s", tokens={"tenant-tok": tenant, "other": "zz"}))
    client = TestClient(app)
    assert client.get("/api/reviewers", headers={"accept": "text/html"}).status_code == 401
    bad = {"authorization": "Bearer nope"}
    assert client.post("/api/reviewers", json={"name": "x"}, headers=bad).status_code == 401
    admin = {"authorization": "Bearer tenant-tok"}
    r = client.post("/api/reviewers", json={"name": "dana"}, headers=admin)
    assert r.status_code == 200 and r.json()["tenant"] == tenant
    token = r.json()["token"]
    assert client.get("/review/api/queues", headers={"authorization": f"Bearer {token}"}).json()["tenant"] == tenant
    assert [x["name"] for x in client.get("/api/reviewers", headers=admin).json()] == ["dana"]
    # another tenant's operator cannot see or disable dana
    assert client.get("/api/reviewers", headers={"authorization": "Bearer other"}).json() == []
    assert client.post("/api/reviewers/dana/disable", headers={"authorization": "Bearer other"}).status_code == 404
    assert client.post("/api/reviewers/dana/disable", headers=admin).json()["disabled"] is True
    assert client.get("/review/api/queues", headers={"authorization": f"Bearer {token}"}).status_code == 401
    assert client.post("/api/reviewers", json={"name": "<bad>"}, headers=admin).status_code == 400


def test_reviewers_cli_through_the_server(store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    import uuid

    from fastapi import FastAPI

    from ragtrace_cli.commands.review import reviewers_main
    from ragtrace_review.web import mount
    from tests.loopback import serving

    app = FastAPI()  # no tenant tokens: tenant "default", administered with the admin token
    mount(app, lambda: store, SimpleNamespace(review_secret="s", admin_token="adm-secret"))
    name = f"remote-{uuid.uuid4().hex[:6]}"
    with serving(app) as url:
        admin = ["--server", url, "--token", "adm-secret"]
        assert reviewers_main(["add", name, *admin]) == 0
        token = capsys.readouterr().out.strip().splitlines()[-1]
        assert token.startswith(auth.TOKEN_PREFIX)
        assert reviewers_main(["list", "--json", *admin]) == 0
        assert name in {r["name"] for r in json.loads(capsys.readouterr().out)}
        assert reviewers_main(["disable", name, *admin]) == 0
        assert f"reviewer {name} disabled" in capsys.readouterr().out
        assert reviewers_main(["disable", "nobody-here", *admin]) == 1
        assert "answered 404" in capsys.readouterr().err
        assert reviewers_main(["list", "--server", url]) == 1  # no credential, no list
        assert "answered 401" in capsys.readouterr().err


@pytest.mark.parametrize(("body", "problem"), [
    ({"per_mode": "20"}, "per_mode: Input should be a valid integer"),
    ({"per_mode": 2.5}, "per_mode: Input should be a valid integer"),
    ({"per_mode": True}, "per_mode: Input should be a valid integer"),  # not a count of 1
    ({"reviewers": "2"}, "reviewers: Input should be a valid integer"),
    ({"low_confidence": "high"}, "low_confidence: Input should be a valid number"),
    ({"release": 5}, "release: Input should be a valid string"),
    ({"description": None}, "description: Input should be a valid string"),
    ({"labels": "labels.jsonl"}, "labels: Input should be a valid list"),
])
def test_api_enqueue_names_an_option_of_the_wrong_type(store: Store, tenant: str, live_url: str, seeded: Seeder,
                                                       body: dict[str, Any], problem: str) -> None:
    # before, "20" failed inside enqueue with "'<' not supported between instances of 'str' and 'int'",
    # 2.5 with "slice indices must be integers", and true queued one trace per mode
    seeded(["ok", "fabrication"])
    _, token = auth.add_reviewer(store, "tia", tenant=tenant)
    r = httpx.post(f"{live_url}/review/api/queues/typed/enqueue", json=body, timeout=60,
                   headers={"authorization": f"Bearer {token}"})
    assert r.status_code == 400 and r.json()["error"] == f"invalid enqueue options: {problem}"
    assert list_items(store, tenant=tenant, queue="typed") == []
    ok = httpx.post(f"{live_url}/review/api/queues/typed/enqueue", json={"per_mode": 1, "low_confidence": 1},
                    timeout=60, headers={"authorization": f"Bearer {token}"})  # an int is a number
    assert ok.status_code == 200 and sum(ok.json()["added"].values()) == 2


@pytest.mark.parametrize(("settings", "sent", "names"), [
    # with tenant tokens the admin token does not open it; the answer says what does
    ({"tokens": {"tenant-tok": "t-admin"}, "admin_token": "adm"}, "adm", "a tenant token of the server's --tokens"),
    ({"admin_token": "adm"}, "wrong", "the server's RAGTRACE_ADMIN_TOKEN"),
    ({"admin_token": "adm"}, None, "the server's RAGTRACE_ADMIN_TOKEN"),
])
def test_reviewer_admin_api_says_which_credential_opens_it(store: Store, settings: dict[str, Any],
                                                           sent: str | None, names: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    # before, it answered "log in at /review/login", which no login there can satisfy
    from fastapi import FastAPI

    from ragtrace_cli.commands.review import reviewers_main
    from ragtrace_review.web import mount
    from tests.loopback import serving

    app = FastAPI()
    mount(app, lambda: store, SimpleNamespace(review_secret="s", **settings))
    with serving(app) as url:
        headers = {"authorization": f"Bearer {sent}"} if sent else {}
        r = httpx.get(f"{url}/api/reviewers", headers=headers, timeout=30)
        assert r.status_code == 401
        error = r.json()["error"]
        assert names in error and "/review/login" not in error
        if sent:  # what `ragtrace reviewers --server` prints is the server's answer
            assert reviewers_main(["list", "--server", url, "--token", sent]) == 1
            assert names in capsys.readouterr().err


def test_reviewers_list_through_the_server_says_when_empty_and_refuses_all_tenants(
        store: Store, tenant: str, capsys: pytest.CaptureFixture[str]) -> None:
    # before: an empty tenant printed nothing at all, and --all-tenants listed the token's tenant only
    from fastapi import FastAPI

    from ragtrace_cli.commands.review import reviewers_main
    from ragtrace_review.web import mount
    from tests.loopback import serving

    app = FastAPI()
    mount(app, lambda: store, SimpleNamespace(review_secret="s", tokens={"empty-tenant-tok": tenant}))
    with serving(app) as url:
        remote = ["--server", url, "--token", "empty-tenant-tok"]
        assert reviewers_main(["list", *remote]) == 0
        out, err = capsys.readouterr()
        assert out == "" and "no reviewers; add one with `ragtrace reviewers add NAME`" in err
        with pytest.raises(SystemExit) as exc:
            reviewers_main(["list", "--all-tenants", *remote])
        assert exc.value.code == 2 and "--all-tenants needs direct store access" in capsys.readouterr().err
        auth.add_reviewer(store, "rae", tenant=tenant)
        assert reviewers_main(["list", *remote]) == 0
        out, err = capsys.readouterr()
        assert "rae" in out and err == ""


def test_review_status_through_the_server_says_when_there_are_no_queues(
        store: Store, tenant: str, live_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    # before: nothing at all was printed (with --store it says "no review queues in tenant ...")
    _, token = auth.add_reviewer(store, "quinn", tenant=tenant)
    assert review_main(["status", "--server", live_url, "--token", token]) == 0
    out, err = capsys.readouterr()
    assert out == "" and f"no review queues in tenant {tenant!r}" in err
    assert review_main(["status", "--server", live_url, "--token", token, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
