"""A page of another site cannot drive the collector (run an audit, administer reviewers, read through a
rebound name), seen from a real browser: Debian's chromium (Playwright) on a page of another origin, against
a real `ragtrace serve` app on loopback without tenant tokens (the default).

The hostile pages are served by a second loopback server under the name ``evil.example`` (Chromium's
``--host-resolver-rules`` maps it to 127.0.0.1), so they are cross-site to the collector exactly as a
page on the internet is; the DNS-rebinding case points that same name at the collector's port.
"""

from __future__ import annotations

import http.server
import re
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from ragtrace_review import auth
from tests import browser
from tests import otlp_builders as T
from tests.collector._server import running

EVIL = "evil.example"
CANARY = "tests.security.canary"

pytestmark = pytest.mark.browser


@contextmanager
def hostile_site(pages: dict[str, str]) -> Iterator[int]:
    """Serve ``pages`` (path → HTML) on a loopback port; yields the port."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = pages.get(self.path, "not here").encode()
            self.send_response(200 if self.path in pages else 404)
            self.send_header("content-type", "text/html; charset=utf-8")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def chromium() -> Iterator[Any]:
    """A page of a headless chromium that resolves the hostile site's name to loopback."""
    with browser.chromium([f"--host-resolver-rules=MAP {EVIL} 127.0.0.1"]) as launched:
        yield launched.new_page()


def test_a_cross_site_text_plain_form_cannot_run_an_audit(chdb_store: Any, tmp_path: Path) -> None:
    # enctype=text/plain sends `name=value`: the name holds JSON up to a string the value closes
    field = '{"labeller":"py:' + CANARY + ':make","stages":"all","relevance_labeller":"none","service":"'
    with running(chdb_store, str(tmp_path / "spool")) as (url, _):
        page_html = (f'<form id="f" method="POST" enctype="text/plain" action="{url}/api/audit">'
                     f"<input name='{field}' value='\"}}'></form><script>f.submit()</script>")
        with hostile_site({"/": page_html}) as evil_port, chromium() as page:
            page.goto(f"http://{EVIL}:{evil_port}/")
            page.wait_for_url(f"{url}/api/audit")
            shown = page.text_content("body") or ""
    assert "cross-origin writes are refused" in shown, shown
    assert CANARY not in sys.modules, "a cross-site form made the server import a module"


def test_a_cross_site_page_cannot_add_or_disable_reviewers(chdb_store: Any, tmp_path: Path) -> None:
    victim = f"victim-{uuid.uuid4().hex[:6]}"
    intruder = f"mallory-{uuid.uuid4().hex[:6]}"
    auth.add_reviewer(chdb_store, victim)  # tenant "default": the server has no tokens
    with running(chdb_store, str(tmp_path / "spool")) as (url, _):
        script = f"""<script>
          const opts = {{method: "POST", mode: "no-cors", headers: {{"content-type": "text/plain"}}}};
          Promise.allSettled([
            fetch("{url}/api/reviewers", {{...opts, body: JSON.stringify({{name: "{intruder}"}})}}),
            fetch("{url}/api/reviewers/{victim}/disable", opts),
          ]).then(() => {{ document.title = "sent"; }});
        </script>"""
        with hostile_site({"/": script}) as evil_port, chromium() as page:
            page.goto(f"http://{EVIL}:{evil_port}/")
            page.wait_for_function("document.title === 'sent'")
    names = {r.name: r for r in auth.list_reviewers(chdb_store)}
    assert intruder not in names, "a cross-site page created a reviewer"
    assert not names[victim].disabled, "a cross-site page disabled a reviewer"


def test_a_rebound_name_reads_no_traces_and_gets_no_token(chdb_store: Any, tmp_path: Path) -> None:
    # DNS rebinding: the attacker's page is loaded from evil.example:PORT, then evil.example points at
    # the collector on that same port, so the page's requests are same-origin to the browser. Here the
    # hostile site gives the port up and the collector takes it (evil.example is 127.0.0.1 throughout).
    service = f"rebind-{uuid.uuid4().hex[:6]}"
    script = """<script>
      window.steal = async () => {
        const traces = await fetch("/api/traces?service=SERVICE");
        const made = await fetch("/api/reviewers", {method: "POST", headers: {"content-type": "application/json"},
                                                    body: JSON.stringify({name: "rebound"})});
        return [traces.status, await traces.text(), made.status, await made.text()];
      };
    </script>""".replace("SERVICE", service)
    with chromium() as page:
        with hostile_site({"/": script}) as port:
            page.goto(f"http://{EVIL}:{port}/")
        with running(chdb_store, str(tmp_path / "spool"), port=port) as (url, app):
            import httpx

            req = T.request(T.standard_trace(T.corpus(5, size=40), 0).spans(), service=service)
            assert httpx.post(f"{url}/v1/traces", content=req.SerializeToString(),
                              headers={"content-type": "application/x-protobuf"}).status_code == 200
            assert app.state.writer.flush(30)
            traces_status, traces_body, made_status, made_body = page.evaluate("window.steal()")
    assert traces_status == 400 and service not in traces_body, traces_body
    assert made_status == 400 and auth.TOKEN_PREFIX not in made_body, made_body
    assert "rebound" not in {r.name for r in auth.list_reviewers(chdb_store)}


def test_the_review_ui_still_works_from_its_own_origin(chdb_store: Any, tmp_path: Path) -> None:
    # the Origin check must let the UI's own forms through: Chromium sends Origin on every POST
    _, token = auth.add_reviewer(chdb_store, f"own-{uuid.uuid4().hex[:6]}")
    with running(chdb_store, str(tmp_path / "spool"), review_secret="s") as (url, _), chromium() as page:
        page.goto(f"{url}/review/")
        assert "/review/login" in page.url
        page.fill("#token", token)
        page.keyboard.press("Enter")
        page.wait_for_url(f"{url}/review/")
        assert re.search(r"queue", page.text_content("body") or "", re.I)
        page.click("button:has-text('Log out')")
        page.wait_for_url(re.compile(r".*/review/login$"))
