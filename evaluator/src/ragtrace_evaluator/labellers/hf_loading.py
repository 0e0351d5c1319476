"""Loading transformers weights without transformers' progress bars.

transformers draws a progress bar on stderr while it loads a model's weights (and another while it
converts GGUF tensors). For the small local models a labeller loads in about a second, that bar is
noise in the output of every `ragtrace audit`. The switch is global in transformers, so it is put
back as it was afterwards: a host process that loads its own models keeps its bars.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["quiet_loading"]


@contextmanager
def quiet_loading() -> Iterator[None]:
    """No transformers progress bar inside the block; the previous setting after it."""
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]
