"""`make test`'s xdist schedule (tests/conftest.py): every test file that loads SmolLM2 in the test
process is in LOADS_SMOLLM2, so all of them share one worker and one load of the model."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import LOADS_SMOLLM2

ROOT = Path(__file__).resolve().parent.parent
#: how a test file asks for SmolLM2 in its own process: a reader, the example generator, a served copy
_LOADS = re.compile(r'CausalLMReader\("smollm2"|generator="smollm2"|_make_app\(str\(folder\), gguf\)')


def test_every_file_that_loads_smollm2_is_scheduled_with_the_others() -> None:
    loading = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py")
                     if p != Path(__file__).resolve() and _LOADS.search(p.read_text(encoding="utf-8")))
    assert loading == sorted(LOADS_SMOLLM2)
