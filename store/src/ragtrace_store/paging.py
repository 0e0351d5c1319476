"""The cursor of a listing's pages: one format for `ragtrace traces`, ``GET /api/traces`` and the
web's ``/traces``.

A cursor names the position after the last trace of a page (its sort key and trace id, the
listing's order: `ragtrace_store.listing`), the order it was made for and the listing's filters
(a fingerprint of them). It is opaque text (base64url JSON), safe in a URL and on a command line.
`decode_cursor` refuses with `CursorError`, whose message says what to do:

- anything that is not a cursor of this format (bad base64 or JSON, a missing or extra field, a
  sort key of the wrong type or outside what the store can hold, an old format);
- a cursor of another order (sort and direction): its key would mean nothing in this one;
- a cursor of other filters: a page is never continued with different ones.

A cursor stays valid while traces arrive: a newer trace sorts before it and does not shift the rest.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import math
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import orjson

from ragtrace_store.clock import STORE_TIME_MAX, STORE_TIME_MIN, as_utc
from ragtrace_store.errors import StoreError

if TYPE_CHECKING:
    from ragtrace_store.listing import TraceListing

__all__ = ["CURSOR_VERSION", "CursorError", "decode_cursor", "encode_cursor"]

#: the format's version, written into every cursor (1 was the time-only cursor before one pager)
CURSOR_VERSION = 2
#: a longer text is not a cursor (a real one is well under 300 characters); refused before decoding
_MAX_LENGTH = 2000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: the milliseconds since the epoch a time key may take: the instants the store's times can hold
_MIN_MS = (STORE_TIME_MIN - _EPOCH) // timedelta(milliseconds=1)
_MAX_MS = (STORE_TIME_MAX - _EPOCH) // timedelta(milliseconds=1)
#: the range of a confidence key: confidences lie in [0, 1]; a label without one sorts as -1 or 2
_CONFIDENCE_KEYS = (-1.0, 2.0)
_FIELDS = frozenset({"v", "s", "d", "k", "id", "f"})


class CursorError(StoreError, ValueError):
    """A cursor that is not one, or belongs to another listing; the message says what to do."""


def _not_a_cursor(cursor: str) -> CursorError:
    return CursorError(f"the page cursor {cursor[:40]!r} is not valid: it is not a cursor of `ragtrace traces`, "
                       "/api/traces or /traces; pass the one given with the previous page, or start again from "
                       "the first page (without a cursor)")


def _fingerprint(listing: TraceListing) -> str:
    """A short hash of what decides which traces a listing holds (its order travels beside it)."""
    flt = listing.filter
    labels = listing.labels if listing.labelled else None
    fields = [flt.tenant, flt.service, flt.release, flt.route,
              flt.since.isoformat() if flt.since else None, flt.until.isoformat() if flt.until else None,
              sorted(flt.trace_ids) if flt.trace_ids is not None else None, listing.include_all, listing.text,
              None if labels is None else [labels.manifest_id, labels.failure_mode, labels.generation,
                                           labels.gold_in_context, labels.incomplete]]
    return hashlib.sha256(orjson.dumps(fields)).hexdigest()[:16]


def _order(listing: TraceListing) -> str:
    return f"{listing.sort}, {'descending' if listing.descending else 'ascending'}"


def encode_cursor(listing: TraceListing, key: datetime | float, trace_id: str) -> str:
    """The cursor after the trace ``trace_id`` whose sort key is ``key`` (its start time in a time
    listing, a naive one taken as UTC; its confidence key in a confidence listing) of ``listing``."""
    if listing.sort == "time":
        if not isinstance(key, datetime):
            raise TypeError(f"a time listing's cursor key is the trace's start time, got {key!r}")
        k: int | float = (as_utc(key) - _EPOCH) // timedelta(milliseconds=1)
    else:
        if isinstance(key, datetime):
            raise TypeError(f"a confidence listing's cursor key is a number, got {key!r}")
        k = float(key)
    raw = orjson.dumps({"v": CURSOR_VERSION, "s": listing.sort, "d": listing.descending, "k": k, "id": trace_id,
                        "f": _fingerprint(listing)})
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(cursor: str, listing: TraceListing) -> tuple[datetime | float, str]:
    """``(sort key, trace id)`` of the trace ``listing`` continues after: a start time (aware UTC) in
    a time listing, a confidence key in a confidence listing. `CursorError` for anything else."""
    text = cursor.strip()
    try:
        if len(text) > _MAX_LENGTH:
            raise ValueError("too long")
        obj: Any = orjson.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        if not isinstance(obj, dict) or set(obj) != _FIELDS or obj["v"] != CURSOR_VERSION:
            raise ValueError("not this format")
        sort, descending, key, trace_id, fingerprint = obj["s"], obj["d"], obj["k"], obj["id"], obj["f"]
        if not (isinstance(sort, str) and isinstance(descending, bool) and isinstance(trace_id, str)
                and isinstance(fingerprint, str)):
            raise ValueError("a field of the wrong type")
        position = _key(sort, key), trace_id
    except (binascii.Error, ValueError, TypeError, orjson.JSONDecodeError):
        # ValueError also covers base64 of non-ASCII text; nothing else can be raised above
        raise _not_a_cursor(cursor) from None
    if (sort, descending) != (listing.sort, listing.descending):
        raise CursorError(f"the page cursor belongs to another sort order ({sort}, "
                          f"{'descending' if descending else 'ascending'}, not {_order(listing)}); start again "
                          "from the first page (without a cursor)")
    if fingerprint != _fingerprint(listing):
        raise CursorError("this cursor continues a listing with other filters: repeat the filters it was made "
                          "with (--release, --service, --since, --until, --all and the tenant of `ragtrace "
                          "traces`; the same query parameters of /api/traces or /traces), or start again from the "
                          "first page (without a cursor)")
    return position


def _key(sort: str, key: Any) -> datetime | float:
    """The sort key a cursor carries, checked to be one the store can hold (ValueError if not)."""
    if sort == "time":
        # whole milliseconds within the store's range: anything else (a float, 2**70) names no
        # stored time, and converting it could overflow the platform's time functions
        if type(key) is not int or not _MIN_MS <= key <= _MAX_MS:
            raise ValueError("not a time the store can hold")
        return _EPOCH + timedelta(milliseconds=key)
    if sort == "confidence":
        if type(key) not in (int, float) or not math.isfinite(key) \
                or not _CONFIDENCE_KEYS[0] <= key <= _CONFIDENCE_KEYS[1]:
            raise ValueError("not a confidence key")
        return float(key)
    raise ValueError("an unknown sort")
