"""`ragtrace compare` on an embedded store another process owns (as `ragtrace serve` does): compare
reads the store directly and has no --server mode, so it says what works instead of suggesting one."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

#: a child process that opens (and migrates) the store, says so, and holds it until its stdin closes
HOLD = ("import sys; from ragtrace_store import open_store; s = open_store(sys.argv[1]); print('held', flush=True); "
        "sys.stdin.read(); s.close()")


@pytest.fixture
def owned_store(tmp_path: Path) -> Iterator[Path]:
    store = tmp_path / "store"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(store)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield store
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=120)


def _compare(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ragtrace_cli.main", "compare", *args], capture_output=True,
                          text=True, timeout=300, check=False)


def test_compare_on_an_owned_store_says_what_works(owned_store: Path, tmp_path: Path) -> None:
    releases = _compare("--baseline", "v1", "--candidate", "v2", "--store", str(owned_store))
    assert releases.returncode == 2
    err = releases.stderr
    assert f"the embedded store {owned_store} is in use by another process" in err
    assert "it has no --server mode" in err
    # what works: the labels as files through the server, compared as files; or the server stopped
    assert "ragtrace audit --server URL --release R --per-trace R.jsonl" in err
    assert "ragtrace compare --baseline A.jsonl --candidate B.jsonl" in err and "stop the server" in err
    # and not the store's general advice, which would send the user to a compare --server that does not exist
    assert "run this command through the serving process" not in err

    # --save of two files opens the store only to keep the report: the same message, after its flag
    record = {"trace_id": "t1", "query_id": "q1", "release": "v1", "gold_in_context": True, "pass": True}
    files = []
    for release in ("v1", "v2"):
        path = tmp_path / f"{release}.jsonl"
        path.write_text(json.dumps({**record, "trace_id": f"t-{release}", "release": release}) + "\n")
        files.append(str(path))
    saved = _compare("--baseline", files[0], "--candidate", files[1], "--resamples", "100", "--save",
                     "--store", str(owned_store))
    assert saved.returncode == 2
    assert "--save: the embedded store" in saved.stderr and "it has no --server mode" in saved.stderr

