"""Loading a labeller's model prints no transformers progress bar, and leaves the host's setting
as it was. In a fresh interpreter: the bar is drawn only on a process's first load of a model."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def test_loading_minilm_draws_no_progress_bar_and_restores_the_setting() -> None:
    code = (
        "import json\n"
        "from transformers.utils import logging as hf_logging\n"
        "from ragtrace_evaluator.labellers.embedding import SentenceEmbedder\n"
        "vec = SentenceEmbedder(backend='torch').embed(['The Eiffel Tower is in Paris.'])\n"
        "print(json.dumps([len(vec[0]), hf_logging.is_progress_bar_enabled()]))\n"
    )
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=240,
                         check=True)
    dims, bars_enabled = json.loads(out.stdout.strip().splitlines()[-1])
    assert dims == 384
    assert bars_enabled is True  # the host process keeps its own bars
    assert "Loading weights" not in out.stderr and "%|" not in out.stderr, out.stderr
