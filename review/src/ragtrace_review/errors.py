"""The review package's one base exception."""

from __future__ import annotations


class ReviewError(Exception):
    """A review operation cannot proceed; the message says what to do instead."""
