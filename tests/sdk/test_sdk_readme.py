"""The README's SDK quick start runs as pasted against `ragtrace serve`: the block is read from the
README, run in a fresh interpreter, and what it sent is read back from the store. The one thing the
test changes is where `ragtrace serve` listens (``RAGTRACE_ENDPOINT``; the block names no endpoint,
so the default ``localhost:4318`` is what a reader gets), because this machine's 4318 may be taken."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from tests.collector._server import running

README = Path(__file__).resolve().parents[2] / "README.md"


def quick_start() -> str:
    text = README.read_text(encoding="utf-8")
    section = text.split("## SDK quick start", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "the README's SDK quick start has no python block"
    return match.group(1)


def test_the_readme_quick_start_runs_as_pasted(chdb_store: Any, tmp_path: Path) -> None:
    code = quick_start()
    assert "endpoint=" not in code  # so it talks to localhost:4318, where `ragtrace serve` listens by default
    tenant = f"readme-{uuid.uuid4().hex[:8]}"
    # a tenant token keeps this test's trace apart in the shared store (RAGTRACE_HEADERS: the block
    # names no headers either)
    with running(chdb_store, str(tmp_path / "spool"), tokens={"readme": tenant}) as (url, app):
        env = {**os.environ, "RAGTRACE_ENDPOINT": url, "RAGTRACE_HEADERS": "authorization=Bearer readme"}
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                              env=env, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert app.state.writer.flush(30)
    first, stats = proc.stdout.splitlines()
    assert first == "Water boils at 100 degrees Celsius at sea level."
    assert "spans_exported=4" in stats and "dropped_export_failed=0" in stats
    (rec,) = chdb_store.read_traces(tenant=tenant)
    assert (rec.query_id, rec.service, rec.release) == ("q1", "qa", "2024-06-01")
    assert [d.id for d in rec.retrieved] == ["boil", "freeze", "mercury"]
    assert [d.id for d in rec.reranked] == [d.id for d in rec.context] == ["boil", "freeze"]
    assert rec.answer == first and rec.complete
