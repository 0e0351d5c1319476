"""Answers of GET /api/traces and /api/traces/{id} are bounded in size (issue 31 item 3).

Before, ``GET /api/traces?content=true&limit=100000`` streamed every trace with its passages' text in one
answer (377 MB, the server's RSS to 3.2 GB). Now passage text is answered in pages only (limit <= 1000,
else 400 saying what to ask), a page ends at the last trace that fits the answer's byte bound with a
cursor to the rest, and a single trace too large for it is a 413 saying how to read it instead. The
bound is 32 MiB; here it is lowered to a few traces so that the real server shows each case quickly.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from ragtrace_collector import app as collector_app
from tests import otlp_builders as T

from ._server import running

PB = {"content-type": "application/x-protobuf"}


def _page(url: str, auth: dict[str, str], **params: Any) -> httpx.Response:
    return httpx.get(f"{url}/api/traces", params=params, headers=auth, timeout=60)


def test_content_listings_come_in_pages_of_bounded_size(chdb_store: Any, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    docs = T.corpus(200, size=1000)
    traces = [T.standard_trace(docs, i) for i in range(12)]
    auth = {"authorization": "Bearer tok"}
    with running(chdb_store, str(tmp_path / "spool"), tokens={"tok": tenant}) as (url, app):
        body = T.request([s for t in traces for s in t.spans()]).SerializeToString()
        assert httpx.post(f"{url}/v1/traces", content=body, headers={**PB, **auth}, timeout=60).status_code == 200
        assert app.state.writer.flush(30)

        # the campaign's request: every trace with its text in one answer
        refused = _page(url, auth, content="true", limit=100_000)
        assert refused.status_code == 400
        assert "limit <= 1000" in refused.json()["error"] and "Ragtrace-Next-Cursor" in refused.json()["error"]

        whole = _page(url, auth, content="true", limit=1000)
        assert whole.status_code == 200 and "ragtrace-next-cursor" not in whole.headers
        sizes = [len(line) + 1 for line in whole.content.splitlines()]
        assert len(sizes) == 12 and min(sizes) > 20_000  # passage text: tens of KB a trace

        # a bound of about three traces: each page stops at the last trace that fits, and the pages
        # together are the listing, each trace once
        bound = sum(sorted(sizes)[-3:])
        monkeypatch.setattr(collector_app, "RESPONSE_MAX_BYTES", bound)
        seen: list[str] = []
        cursor = None
        for _ in range(12):
            r = _page(url, auth, content="true", limit=10, **({"cursor": cursor} if cursor else {}))
            assert r.status_code == 200 and 0 < len(r.content) <= bound
            seen += [orjson.loads(line)["trace_id"] for line in r.content.splitlines()]
            cursor = r.headers.get("ragtrace-next-cursor")
            if cursor is None:
                break
        assert len(seen) == len(set(seen)) == 12
        assert seen == [orjson.loads(line)["trace_id"] for line in whole.content.splitlines()]

        # a trace larger than the bound: 413 saying how to read it, in the listing and alone
        monkeypatch.setattr(collector_app, "RESPONSE_MAX_BYTES", min(sizes) - 100)
        too_large = _page(url, auth, content="true", limit=10)
        assert too_large.status_code == 413
        assert "list without content=true" in too_large.json()["error"]
        tid = traces[0].trace_id
        alone = httpx.get(f"{url}/api/traces/{tid}", headers=auth, timeout=60)
        assert alone.status_code == 413 and "content=false" in alone.json()["error"]
        without_text = httpx.get(f"{url}/api/traces/{tid}", params={"content": "false"}, headers=auth, timeout=60)
        assert without_text.status_code == 200 and without_text.json()["trace_id"] == tid
        # without passage text nothing is near the bound: the listing is answered as before
        assert len(_page(url, auth, limit=10).content.splitlines()) == 10
