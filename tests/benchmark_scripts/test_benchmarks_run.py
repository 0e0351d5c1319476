"""Every script in benchmarks/ starts as docs/benchmarks.md runs it: from the checkout root, with the
environment's Python and nothing on PYTHONPATH (a benchmark that needs `tests` or `benchmarks` on
the path puts the root there itself).

`--help` imports everything a benchmark imports and parses its options without running it, so an
import that breaks (a renamed store function, a helper moved out of `tests/`) fails here instead
of the next time someone measures. Helper modules without a ``__main__`` block only import.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = sorted((ROOT / "benchmarks").glob("*.py"))


def test_there_are_benchmarks_to_check() -> None:
    assert len(BENCHMARKS) >= 10, BENCHMARKS


@pytest.mark.parametrize("script", BENCHMARKS, ids=lambda p: p.name)
def test_each_benchmark_runs_from_the_checkout_root(script: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, str(script.relative_to(ROOT)), "--help"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, f"{script.name} --help exited {done.returncode}:\n{done.stderr[-3000:]}"
    if 'if __name__ == "__main__":' in script.read_text(encoding="utf-8"):
        assert done.stdout.startswith("usage:"), f"{script.name} --help printed no usage:\n{done.stdout[:500]}"
