"""Without Debian's chromium the run stops before any test, with one error that says how to install
it; `-m 'not browser'` still runs everything else. (Run in a child pytest whose browser path names a
file that does not exist: the real one is installed on every machine that runs this suite.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: a browser test and a quick plain one beside it
MODULE = "tests/compare/test_surface_grounding.py"
BOTH = ("-k", "headless_chromium or bad_min_change")


def _pytest_without_browser(*args: str) -> subprocess.CompletedProcess[str]:
    run = ("import pathlib, sys, pytest, tests.browser as b; b.CHROMIUM = pathlib.Path('/nonexistent/chromium'); "
           "sys.exit(pytest.main(sys.argv[1:]))")
    return subprocess.run([sys.executable, "-c", run, "-q", "-p", "no:cacheprovider", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, check=False)


def test_a_missing_browser_is_one_error_that_says_how_to_install_it() -> None:
    done = _pytest_without_browser(MODULE, *BOTH)
    out = done.stdout + done.stderr
    assert done.returncode == 4, out  # pytest's usage error: nothing ran
    errors = [line for line in out.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1, out
    assert "1 browser test(s)" in errors[0] and "/nonexistent/chromium" in errors[0], errors
    assert "make system-deps" in errors[0] and "apt-get install -y chromium" in errors[0], errors
    assert "passed" not in out and "failed" not in out and "skipped" not in out, out


def test_leaving_the_browser_tests_out_runs_the_rest() -> None:
    done = _pytest_without_browser(MODULE, *BOTH, "-m", "not browser")
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "1 passed" in out and "skipped" not in out, out


def test_under_xdist_workers_it_is_the_same_one_error(tmp_path: Path) -> None:
    # `make test` runs the suite on two xdist workers, each a process of its own: the browser path is
    # replaced by a plugin (`-p`), which every worker loads, and the run still stops with one error
    (tmp_path / "no_chromium.py").write_text(
        "import pathlib\nimport tests.browser as b\n\nb.CHROMIUM = pathlib.Path('/nonexistent/chromium')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(tmp_path), os.environ.get("PYTHONPATH"))))}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no_chromium",
                           "-n", "2", MODULE, *BOTH], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    out = done.stdout + done.stderr
    assert done.returncode == 4, out
    errors = [line for line in out.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1, out
    assert "1 browser test(s)" in errors[0] and "/nonexistent/chromium" in errors[0], errors
    assert "INTERNALERROR" not in out and "crashed" not in out, out
    assert "passed" not in out and "failed" not in out and "skipped" not in out, out
