"""End to end through the server: traces with known injected failures sent through `ragtrace serve` over
real OTLP/HTTP (protobuf on loopback) come out of `ragtrace audit --server` with the right primary
mode, judged by the real offline labeller running inside the serving process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests import otlp_builders as otlp

from .fixtures import PASSAGES, QUERY, scenario

REPO = Path(__file__).resolve().parents[2]
RAGTRACE = str(Path(sys.executable).with_name("ragtrace"))
LABELLER = "py:tests.audit.fixtures:make_grounding_labeller"
TOKEN = "audit-token"


def _env() -> dict[str, str]:
    # the repository first, then source roots already on the path (a worktree's own packages)
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "HF_HUB_OFFLINE": "1"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    store = tmp_path_factory.mktemp("serve-store")
    port = otlp.free_port()
    log = (store.parent / "serve.log").open("w")
    proc = subprocess.Popen([RAGTRACE, "serve", "--store", str(store), "--port", str(port), "--tokens",
                             f"{TOKEN}=acme", "--no-fsync", "--batch-interval", "0.1s", "--log-level", "warning"],
                            cwd=REPO, env=_env(), stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        otlp.wait_until_ready(url, proc, store.parent / "serve.log", timeout=60, token=TOKEN)
        yield url, store
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _spec(trace_id: str, tr: object) -> object:
    docs = lambda ids: [otlp.Doc(d, PASSAGES[d], 1.0 - i / 10) for i, d in enumerate(ids)]  # noqa: E731
    t = tr  # a fixtures.Trace
    return otlp.TraceSpec(
        trace_id=trace_id, query=QUERY, answer=t.answer, retrieved=docs(t.retrieved),  # type: ignore[attr-defined]
        reranked=docs(t.reranked or t.retrieved), context=docs(t.context),  # type: ignore[attr-defined]
        top_k=len(t.context), gold=t.gold or [], with_reranker=t.reranked is not None,  # type: ignore[attr-defined]
    )


def test_injected_failures_through_serve(server: tuple[str, Path], tmp_path: Path) -> None:
    url, store = server
    traces = scenario("srv")
    ids = {name: os.urandom(16).hex() for name in traces}
    spans = [s for name, tr in traces.items() for s in _spec(ids[name], tr).spans()]  # type: ignore[attr-defined]
    body = otlp.request(spans, service="qa", release="r-serve").SerializeToString()
    resp = httpx.post(f"{url}/v1/traces", content=body, timeout=30,
                      headers={"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {TOKEN}"})
    assert resp.status_code == 200, resp.text
    deadline = time.monotonic() + 30
    while True:
        listed = httpx.get(f"{url}/api/traces", params={"release": "r-serve"}, timeout=10,
                           headers={"Authorization": f"Bearer {TOKEN}"})
        if len(listed.text.splitlines()) == len(traces):
            break
        assert time.monotonic() < deadline, f"only {len(listed.text.splitlines())} traces stored"
        time.sleep(0.2)

    # The serving process owns the embedded store: a direct audit is refused with the way out.
    direct = subprocess.run([RAGTRACE, "audit", "--store", str(store), "--labeller", LABELLER], cwd=REPO,
                            env=_env(), capture_output=True, text=True, timeout=120, check=False)
    assert direct.returncode != 0 and "--server" in direct.stderr

    report_path, per_trace = tmp_path / "report.json", tmp_path / "labels.jsonl"
    proc = subprocess.run([RAGTRACE, "audit", "--server", url, "--token", TOKEN, "--release", "r-serve",
                           "--labeller", "offline", "--relevance-labeller", "none", "--json", str(report_path),
                           "--per-trace", str(per_trace)],
                          cwd=REPO, env=_env(), capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(report_path.read_text())
    assert report["n"] == len(traces) and report["filters"]["tenant"] == "acme"
    records = {json.loads(x)["trace_id"]: json.loads(x) for x in per_trace.read_text().splitlines()}
    for name, trace_id in ids.items():
        assert records[trace_id]["failure_mode"] == name.split("-")[0], (name, records[trace_id])
        assert records[trace_id]["retrieval"]["gold_source"] == "span"
    assert "Primary failure mode" in proc.stdout

    wrong = subprocess.run([RAGTRACE, "audit", "--server", url, "--token", "nope", "--labeller", LABELLER],
                           cwd=REPO, env=_env(), capture_output=True, text=True, timeout=60, check=False)
    assert wrong.returncode == 1 and "401" in wrong.stderr
