"""The demo's output is its steps and summary: loading the example service's reranker draws no
transformers progress bar. In a fresh interpreter, since the bar is drawn only on a process's first
load of a model; the bare encoder in the same test shows that the bar would be there otherwise."""

from __future__ import annotations

import os
import subprocess
import sys


def _stderr_of(code: str) -> str:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=240,
                         check=True)
    assert out.stdout.strip().splitlines()[-1] == "384", out.stdout
    return out.stderr


def test_the_demo_loads_its_reranker_without_a_progress_bar() -> None:
    shown = _stderr_of("from ragtrace_examples.components import MiniLMEncoder\n"
                       "print(len(MiniLMEncoder().encode(['The Eiffel Tower is in Paris.'])[0]))\n")
    assert "Loading weights" in shown  # what the demo printed before
    quiet = _stderr_of("from ragtrace_examples.demo import reranker_encoder\n"
                       "print(len(reranker_encoder().encode(['The Eiffel Tower is in Paris.'])[0]))\n")
    assert "Loading weights" not in quiet and "%|" not in quiet, quiet
