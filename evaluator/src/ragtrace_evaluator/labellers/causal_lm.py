"""Causal LMs loaded once per process.

SmolLM2 from its GGUF file takes ~15 s of CPU to load (transformers reads the GGUF metadata, the
tokenizer's 49k-entry vocabulary among it, in Python and de-quantises every tensor), while one greedy
answer takes about a second. Every eRAG reader, and the example service's generator, used to load its
own copy, so a process paid that again for each one: `ragtrace serve --audit-every` with an eRAG
labeller at every audit, a test run once per test.

`load_causal_lm` hands the same tokenizer and model to every caller, with the lock that serialises
generation on them. It keeps the models used last while their weights fit in `KEEP_BYTES` (SmolLM2
is ~0.5 GB of float32), so a small model loaded in between does not push a large one out.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragtrace_evaluator.labellers.hf_loading import quiet_loading

__all__ = ["KEEP_BYTES", "LoadedLM", "load_causal_lm"]

#: the weights kept loaded at most (the model used last is kept whatever its size)
KEEP_BYTES = 2 * 1024**3


@dataclass(frozen=True)
class LoadedLM:
    """A tokenizer and its causal LM (in inference mode, float32, a pad token set); hold ``lock``
    while generating, since other callers share them."""

    tokenizer: Any
    model: Any
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    #: bytes of the model's weights
    nbytes: int = 0


_lock = threading.Lock()
#: least recently used first
_loaded: OrderedDict[tuple[str, str | None], LoadedLM] = OrderedDict()


def load_causal_lm(model: str | Path, gguf_file: str | None = None) -> LoadedLM:
    """The tokenizer and model of ``model`` (a hub id or a directory; ``gguf_file`` inside it), loaded
    on the first call and shared afterwards. Raises OSError when transformers cannot load it."""
    location = Path(model).expanduser()
    key = (str(location.resolve()) if location.exists() else str(model), gguf_file)
    with _lock:
        if key in _loaded:
            _loaded.move_to_end(key)
            return _loaded[key]
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        kwargs = {"gguf_file": gguf_file} if gguf_file else {}
        with quiet_loading():
            tokenizer = AutoTokenizer.from_pretrained(str(model), **kwargs)
            lm: Any = AutoModelForCausalLM.from_pretrained(str(model), dtype=torch.float32, **kwargs)
        lm.eval()
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        loaded = _loaded[key] = LoadedLM(tokenizer, lm, nbytes=sum(p.numel() * p.element_size()
                                                                   for p in lm.parameters()))
        while len(_loaded) > 1 and sum(m.nbytes for m in _loaded.values()) > KEEP_BYTES:
            _loaded.popitem(last=False)
        return loaded
