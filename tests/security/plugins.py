"""Labeller plug-ins for the local (CLI) path of `run_audit`, which may load ``py:MODULE:FUNCTION``."""

from __future__ import annotations


def not_a_labeller(arg: str) -> object:
    """What a broken plug-in returns: something that is not a labeller at all."""
    return object()
