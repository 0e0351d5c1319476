"""A Node.js service on the official OpenTelemetry JS SDK (tests/collector/js/client.js) sending
OpenInference attributes by hand over OTLP/HTTP to a real serve app: what is read back is what the
client was given, and JS's attribute limit (it keeps the oldest 128 attributes, so the reranker's
output goes first) marks the trace incomplete instead of mislabelling it.

Node.js is not guaranteed on every CI machine: without it, or without the client's npm packages
(`make test` installs them with `npm ci --prefix tests/collector/js` when npm exists), this module is
skipped and says which."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ._interop import GOOD, PASSAGES, QUERY, TOKEN, Collector, collector

JS = Path(__file__).parent / "js"
NODE = shutil.which("node")
if NODE is None:
    pytest.skip("Node.js is not installed: the OpenTelemetry JS client test needs `node` (optional on CI)",
                allow_module_level=True)
if not (JS / "node_modules" / "@opentelemetry" / "sdk-trace-base").is_dir():
    pytest.skip("the JS client's packages are not installed: run `npm ci --prefix tests/collector/js` "
                "(make test does when npm exists)", allow_module_level=True)

NAMES = list(PASSAGES)


@pytest.fixture(scope="module")
def js(chdb_store: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    with collector(chdb_store, tmp_path_factory.mktemp("js")) as c:
        yield c


def send(c: Collector, release: str, traces: list[dict[str, Any]], attribute_limit: int | None = None) -> dict[
        str, str]:
    plan = {"endpoint": c.url, "token": TOKEN, "release": release, "attributeLimit": attribute_limit,
            "traces": traces}
    assert NODE is not None
    proc = subprocess.run([NODE, str(JS / "client.js")], input=json.dumps(plan), capture_output=True, text=True,
                          timeout=120, cwd=JS)
    assert proc.returncode == 0, proc.stderr
    assert c.app.state.writer.flush(30)
    return {(o := json.loads(line))["queryId"]: o["traceId"] for line in proc.stdout.splitlines()}


def test_a_js_client_is_read_exactly(js: Collector) -> None:
    candidates = [[n, PASSAGES[n]] for n in NAMES]
    traces = [{"queryId": "js-1", "query": QUERY, "candidates": candidates, "reranked": ["salt", "gold", "ice"],
               "shown": ["salt", "gold"], "answer": GOOD}]
    (tid,) = send(js, "js-exact", traces).values()
    rec = js.record(tid)
    assert [d.id for d in rec.retrieved] == NAMES and [d.id for d in rec.reranked] == ["salt", "gold", "ice"]
    assert [d.id for d in rec.context] == ["salt", "gold"] and rec.context_source == "prompt"
    assert (rec.query, rec.answer, rec.query_id) == (QUERY, GOOD, "js-1") and rec.complete


def test_100_candidates_through_the_js_sdk_default_limit_are_incomplete(js: Collector) -> None:
    many = [[f"c{i:03d}", f"passage c{i:03d} about nothing in particular"] for i in range(100)]
    trace = {"queryId": "js-100", "query": QUERY, "candidates": many, "reranked": [m[0] for m in many[:5]],
             "shown": [m[0] for m in many[:3]], "answer": GOOD}
    (stock,) = send(js, "js-100", [trace]).values()
    (raised,) = send(js, "js-100", [trace], attribute_limit=1024).values()
    rec = js.record(stock)
    codes = {r.split(":", 1)[0] for r in rec.incomplete_reasons}
    assert not rec.complete and "dropped_attributes" in codes
    # JS keeps the oldest attributes: the reranker span lost its output documents, not its input
    assert any("reranker 'rerank' has" in r and "no output documents" in r for r in rec.incomplete_reasons)
    rec = js.record(raised)
    assert rec.complete and [d.id for d in rec.retrieved] == [m[0] for m in many]
    assert [d.id for d in rec.reranked] == [m[0] for m in many[:5]]
    assert [d.id for d in rec.context] == [m[0] for m in many[:3]]
