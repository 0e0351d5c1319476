"""The first reviewer, created while `ragtrace serve` owns its embedded store and has no tokens: the
server leaves a local admin credential (mode 0600) in the store directory, and `ragtrace reviewers`
run by the same user on this machine proves itself with it, through --server or --store alike. A
use spends it; a caller that is not on loopback, comes through a proxy, or is another user cannot
use it. Everything against a real `ragtrace serve` over loopback, the CLI as a subprocess."""

from __future__ import annotations

import json
import os
import re
import socket
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import pytest

from ragtrace_review.local_admin import FILENAME
from tests.faults._serve import serve

RAGTRACE = str(Path(sys.executable).with_name("ragtrace"))


def _ragtrace(*args: str, store: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RAGTRACE_TOKEN", "RAGTRACE_ADMIN_TOKEN")}
    env["RAGTRACE_STORE"] = str(store)
    return subprocess.run([RAGTRACE, *args], capture_output=True, text=True, timeout=120, env=env)


def _this_machine_not_loopback() -> str:
    """An address of this machine that is not loopback (a connection to it is a remote caller's)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("198.51.100.1", 9))  # no packet is sent: this picks the outgoing interface's address
        address = s.getsockname()[0]
    assert not address.startswith("127."), "this machine has no address but loopback to call from"
    return address


def _log_in(url: str, token: str) -> httpx.Client:
    client = httpx.Client(base_url=url, timeout=60)
    page = client.get("/review/login")
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert csrf, page.text[:500]
    login = client.post("/review/login", data={"csrf_token": csrf.group(1), "token": token, "next": "/traces"})
    assert login.status_code == 303 and login.headers["location"] == "/traces", login.text[:500]
    return client


def test_the_first_reviewer_logs_in_while_the_server_runs(tmp_path: Path) -> None:
    with serve(tmp_path, "--host", "0.0.0.0", "--allowed-hosts", "*") as (url, port, log, _pid):
        url = f"http://127.0.0.1:{port}"
        store = tmp_path / f"store-{port}"
        cred = store / FILENAME
        info = cred.stat()
        assert stat.S_IMODE(info.st_mode) == 0o600 and info.st_uid == os.getuid()
        first = json.loads(cred.read_text())
        assert first["url"] == url
        assert f"ragtrace reviewers add NAME --server {url}" in log.read_text()

        # without a token, through --server: the CLI sends the credential, the server spends it
        added = _ragtrace("reviewers", "add", "alice", "--server", url, store=store)
        assert added.returncode == 0, added.stderr
        alice = added.stdout.strip().splitlines()[-1]
        browser = _log_in(url, alice)
        try:
            assert browser.get("/traces").status_code == 200
        finally:
            browser.close()
        spent = httpx.get(f"{url}/api/reviewers", headers={"authorization": f"Bearer {first['token']}"}, timeout=30)
        assert spent.status_code == 401, spent.text
        assert json.loads(cred.read_text())["token"] != first["token"]

        # through --store, which the server owns: the same credential instead of "the store is in use"
        bob = _ragtrace("reviewers", "add", "bob", "--role", "viewer", "--store", str(store), store=store)
        assert bob.returncode == 0, bob.stderr
        assert f"going through it with its local admin credential ({cred})" in bob.stderr
        listed = _ragtrace("reviewers", "list", "--json", "--store", str(store), store=store)
        assert listed.returncode == 0, listed.stderr
        assert {(r["name"], r["role"]) for r in json.loads(listed.stdout)} == {("alice", "reviewer"),
                                                                              ("bob", "viewer")}

        # the current credential opens nothing from another address of this machine, nor through a proxy
        token = json.loads(cred.read_text())["token"]
        bearer = {"authorization": f"Bearer {token}"}
        remote = httpx.get(f"http://{_this_machine_not_loopback()}:{port}/api/reviewers", headers=bearer, timeout=30)
        assert remote.status_code == 401, remote.text
        assert "only the user running the server can read" in remote.json()["error"]
        for proxy in ({"x-forwarded-for": "203.0.113.7"}, {"x-forwarded-for": "127.0.0.1"},
                      {"forwarded": "for=127.0.0.1"}, {"x-real-ip": "127.0.0.1"}):
            relayed = httpx.get(f"{url}/api/reviewers", headers={**bearer, **proxy}, timeout=30)
            assert relayed.status_code == 401, (proxy, relayed.text)
        # ... and those refusals did not spend it: from loopback it still opens the API, once
        assert httpx.get(f"{url}/api/reviewers", headers=bearer, timeout=30).status_code == 200
        assert httpx.get(f"{url}/api/reviewers", headers=bearer, timeout=30).status_code == 401

        # a copy that others may read proves nothing
        os.chmod(cred, 0o644)
        loose = _ragtrace("reviewers", "list", "--server", url, store=store)
        assert loose.returncode == 1 and "can be read by other users (mode 644)" in loose.stderr, loose.stderr
        os.chmod(cred, 0o600)
    assert not cred.exists(), "the server removes its credential when it stops"


@pytest.mark.skipif(os.geteuid() != 0, reason="running a command as another user needs root")
def test_another_user_of_the_machine_cannot_use_it() -> None:
    nobody = 65534
    # a directory anyone may enter (pytest's own are the user's only): only the file's mode protects it
    with tempfile.TemporaryDirectory(prefix="ragtrace-first-reviewer-") as name:
        tmp = Path(name)
        tmp.chmod(0o755)
        with serve(tmp) as (url, port, _log, _pid):
            store = tmp / f"store-{port}"
            cred = store / FILENAME
            store.chmod(0o755)
            # another user cannot read it (this venv's interpreter may live where that user cannot
            # run it, so the reading is left to cat)
            other = subprocess.run(["cat", str(cred)], capture_output=True, text=True, timeout=30, user=nobody)
            assert other.returncode == 1 and "Permission denied" in other.stderr, other
            assert store.stat().st_mode & 0o005 == 0o005  # the directory was open to them: the file's mode refused
            # a credential file that is not the caller's own is refused even where it can be read
            os.chown(cred, nobody, -1)
            try:
                foreign = _ragtrace("reviewers", "add", "mallory", "--server", url, store=store)
            finally:
                os.chown(cred, 0, -1)
            assert foreign.returncode == 1 and f"{cred} belongs to uid {nobody}, not to you" in foreign.stderr
            listed = _ragtrace("reviewers", "list", "--json", "--server", url, store=store)
            assert listed.returncode == 0 and json.loads(listed.stdout) == [], listed.stderr
