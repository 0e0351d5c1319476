"""The store's exceptions: one base, whose messages say what to do."""

from __future__ import annotations


class StoreError(Exception):
    """Base of every store error; the message says what to do."""


class StoreLockedError(StoreError):
    """The embedded store directory is owned by another process."""


__all__ = ["StoreError", "StoreLockedError"]
