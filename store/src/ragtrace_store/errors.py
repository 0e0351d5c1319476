"""The store's exceptions: one base, whose messages say what to do."""

from __future__ import annotations


class StoreError(Exception):
    """Base of every store error; the message says what to do."""


class StoreLockedError(StoreError):
    """The embedded store directory is owned by another process."""


def not_utf8(path: object, exc: UnicodeDecodeError) -> str:
    """What to say about an input file that is not UTF-8 text (a binary file, a UTF-16 export)."""
    what = "UTF-16 text" if exc.object[:2] in (b"\xff\xfe", b"\xfe\xff") else "not UTF-8 text"
    return (f"{path}: {what} (byte 0x{exc.object[exc.start]:02x}: {exc.reason}); give a UTF-8 text file "
            "(e.g. convert it with `iconv -t UTF-8`)")


__all__ = ["StoreError", "StoreLockedError", "not_utf8"]
