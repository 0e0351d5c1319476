"""How many bytes the collector holds for clients, and whether one more request fits.

Held bytes are the request bodies being received or decoded plus the decoded rows waiting for
the store (the writer's queue). The OTLP route asks `fits` with the request's Content-Length
before it reads a byte of the body (429 when it does not fit), then `take`s each chunk as it
arrives, so a client is charged for what it actually sent: a slow client that declares 64 MB and
sends a trickle holds a trickle. A burst of requests that all fitted when they started can
outgrow the bound while their bodies arrive; the chunk that does not fit is refused (429) too,
so the bound holds. One request always fits when nothing else is held, so the largest allowed
body (at most the bound, `CollectorSettings` checks) can always get through.

A decoded request's rows are charged with `take` too before they are spooled (429 when they do
not fit), and `to_queue` moves that charge to the writer's queue under the admission lock, so
`held` never counts the same rows twice nor misses them while they change hands.

The decode of a body (parse, walk, spool compression) needs a few times its size on top; at most
`decode_slots` requests decode at once, so that part is bounded by the largest bodies times the
slots, not by the number of clients.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable


class Admission:
    def __init__(self, limit: int, queued: Callable[[], int]) -> None:
        """``limit``: bytes; ``queued``: the decoded rows waiting for the store, in bytes."""
        self.limit = limit
        self.queued = queued
        self._lock = threading.Lock()
        self._bodies = 0

    @property
    def bodies(self) -> int:
        """Bytes of request bodies received and not yet released."""
        return self._bodies

    def held(self) -> int:
        """Bodies plus queued rows, read together under the admission lock (two separate gauges
        can count a request twice as its rows move from its body to the queue)."""
        with self._lock:
            return self._bodies + self.queued()

    def fits(self, nbytes: int) -> bool:
        """Whether a request of ``nbytes`` (its Content-Length; 0 when unknown) may start now."""
        with self._lock:
            held = self._bodies + self.queued()
            return held == 0 or held + nbytes <= self.limit

    def take(self, nbytes: int, mine: int) -> bool:
        """Charge ``nbytes`` more to a request that holds ``mine``; False (nothing charged) when
        they do not fit and the request is not the only one holding anything."""
        with self._lock:
            held = self._bodies + self.queued()
            if held + nbytes > self.limit and held > mine:
                return False
            self._bodies += nbytes
            return True

    def to_queue(self, nbytes: int, enqueue: Callable[[], None]) -> None:
        """Hand ``nbytes`` a request has charged (its decoded rows) to the writer's queue: ``enqueue``
        adds them to what ``queued`` counts, and runs under this lock so that `held`, `fits` and
        `take` see the rows exactly once. If ``enqueue`` raises, the request still holds them."""
        with self._lock:
            enqueue()
            self._bodies -= nbytes

    def give_back(self, nbytes: int) -> None:
        with self._lock:
            self._bodies -= nbytes


def decode_slots(ingest_workers: int) -> int:
    """Requests decoded at once: one per core (the native walk parses outside the GIL), at least
    two, and at least one per ingest worker process."""
    return max(2, os.cpu_count() or 1, ingest_workers)
