"""`ragtrace ... | head`: when the reader closes the pipe early the command stops without a
BrokenPipeError traceback (the console script in its own process, stdout a real pipe)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

RAGTRACE = str(Path(sys.executable).with_name("ragtrace"))


def test_a_reader_that_stops_early_gets_no_traceback(tmp_path: Path) -> None:
    # per-query output far larger than a pipe's buffer, so the writer meets the closed pipe
    qrels, run = tmp_path / "qrels.txt", tmp_path / "run.txt"
    qrels.write_text("".join(f"q{i} 0 d{i} 1\n" for i in range(3000)), encoding="utf-8")
    run.write_text("".join(f"q{i} Q0 d{i} 1 0.5 tag\n" for i in range(3000)), encoding="utf-8")
    proc = subprocess.Popen([RAGTRACE, "metrics", "--qrels", str(qrels), "--run", str(run), "-q"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ))
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    code = proc.wait(timeout=120)
    assert first.strip(), "the command printed nothing before the pipe closed"
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert code == 141
