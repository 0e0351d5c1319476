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

The decode of a body (parse, walk, spool compression) needs memory of its own, which its bytes do not
tell: a million attribute-less spans fit in 63 MiB and decode to 2 GB. Before a request is decoded,
what its decode will hold is counted from its wire bytes (`ragtrace_collector.request_cost`) and
reserved (`Ticket.reserve`): a request that could not fit even alone is refused with 413 (the sender
must split it), one that does not fit now with 429. So bodies, decodes and queued rows stay within
the limit together, whatever the requests' span counts.

The store writer's inserts need working memory of their own beside the rows (the Arrow copy, the
engine's block and compressed columns: `ragtrace_collector.writer.insert_working_bytes`), bounded by
slicing large inserts. That bound (``insert_reserve``) is kept out of what bodies, decodes and rows may
take, and the insert in progress is counted in `held` as it runs; so what the collector holds stays
within the limit with the inserts too. Only a request alone (nothing else held, nothing queued or being
written) may use the whole limit, so the largest allowed request always gets through.

Two large requests that each fit alone but not together must not refuse each other forever (each
holding its body while the other's reservation fails). The oldest request in progress may wait for
room (`ADMISSION_WAIT_S` at most); any other whose reservation or chunk does not fit is refused
(429) and frees what it held, and while the oldest waits the room it waits for is kept for it. So of
two such requests one gets through.
"""

from __future__ import annotations

import enum
import itertools
import os
import threading
import time
from collections.abc import Callable

#: seconds the oldest request in progress waits for room before it too is refused
ADMISSION_WAIT_S = 5.0


class Verdict(enum.Enum):
    OK = "ok"
    BUSY = "busy"  # does not fit now: 429, retry
    TOO_LARGE = "too_large"  # could not fit even alone: 413


class Admission:
    def __init__(self, limit: int, queued: Callable[[], int], *, working: Callable[[], int] = lambda: 0,
                 insert_reserve: int = 0, clock: Callable[[], float] = time.monotonic) -> None:
        """``limit``: bytes; ``queued``: the decoded rows waiting for the store or being written, in bytes;
        ``working``: the working memory of the insert in progress, at most ``insert_reserve``."""
        self.limit = limit
        self.queued = queued
        self.working = working
        self.insert_reserve = insert_reserve
        self.clock = clock
        self._lock = threading.Condition()
        self._bodies = 0
        self._numbers = itertools.count()
        self._open: dict[int, Ticket] = {}
        #: (ticket number, bytes) of the oldest request while it waits for room
        self._waiter: tuple[int, int] | None = None

    @property
    def bodies(self) -> int:
        """Bytes of request bodies received (and decodes reserved) and not yet released."""
        return self._bodies

    def held(self) -> int:
        """Bodies plus queued rows plus the insert in progress, read together under the admission lock
        (two separate gauges can count a request twice as its rows move from its body to the queue)."""
        with self._lock:
            return self._bodies + self.queued() + self.working()

    def _committed(self) -> int:
        """Bodies and rows, plus what the inserts may need (the reserve) once anything is held."""
        held = self._bodies + self.queued()
        return held + self.insert_reserve if held or self.working() else 0

    def _kept_for_waiter(self, number: int | None) -> int:
        waiter = self._waiter
        return waiter[1] if waiter is not None and waiter[0] != number else 0

    def fits(self, nbytes: int) -> bool:
        """Whether a request of ``nbytes`` (its Content-Length; 0 when unknown) may start now."""
        with self._lock:
            held = self._committed()
            return held == 0 or held + nbytes + self._kept_for_waiter(None) <= self.limit

    def take(self, nbytes: int, mine: int) -> bool:
        """Charge ``nbytes`` more to a request that holds ``mine``; False (nothing charged) when
        they do not fit and the request is not the only one holding anything."""
        return self._take(nbytes, mine, None)

    def _take(self, nbytes: int, mine: int, number: int | None) -> bool:
        with self._lock:
            held = self._committed()
            # alone (nothing but this request held, nothing being written): the whole limit
            alone = self._bodies + self.queued() + self.working() <= mine
            if held + nbytes + self._kept_for_waiter(number) > self.limit and not alone:
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
            self._lock.notify_all()

    def give_back(self, nbytes: int) -> None:
        with self._lock:
            self._bodies -= nbytes
            self._lock.notify_all()

    def open(self) -> Ticket:
        """A new request's ticket (its age decides who may wait); close it when the request ends."""
        with self._lock:
            ticket = Ticket(self, next(self._numbers))
            self._open[ticket.number] = ticket
            return ticket

    def _reserve(self, ticket: Ticket, nbytes: int, wait_s: float) -> Verdict:
        with self._lock:
            if ticket.held + nbytes > self.limit:
                return Verdict.TOO_LARGE
            deadline = self.clock() + wait_s
            try:
                while True:
                    held = self._committed()
                    alone = self._bodies + self.queued() + self.working() <= ticket.held
                    if alone or held + nbytes + self._kept_for_waiter(ticket.number) <= self.limit:
                        self._bodies += nbytes
                        ticket.held += nbytes
                        return Verdict.OK
                    left = deadline - self.clock()
                    if ticket.number != min(self._open) or left <= 0:
                        return Verdict.BUSY
                    # the oldest waits, and the room it waits for is kept from younger requests
                    self._waiter = (ticket.number, nbytes)
                    # the writer's queue drains without telling: look again at least every 50 ms
                    self._lock.wait(min(left, 0.05))
            finally:
                if self._waiter is not None and self._waiter[0] == ticket.number:
                    self._waiter = None
                    self._lock.notify_all()

    def _close(self, ticket: Ticket) -> None:
        with self._lock:
            self._open.pop(ticket.number, None)
            self._bodies -= ticket.held
            ticket.held = 0
            self._lock.notify_all()


class Ticket:
    """What one request holds under an `Admission`, and its age. Thread-safe through the admission's lock."""

    def __init__(self, admission: Admission, number: int) -> None:
        self.admission = admission
        self.number = number
        self.held = 0

    def take(self, nbytes: int) -> bool:
        """Charge a chunk of the body as it arrives: False (nothing charged) when it does not fit and
        the request is not the only one holding anything. Never waits."""
        ok = self.admission._take(nbytes, self.held, self.number)
        if ok:
            self.held += nbytes
        return ok

    def reserve(self, nbytes: int, wait_s: float = ADMISSION_WAIT_S) -> Verdict:
        """Reserve what the decode will hold: OK (charged), BUSY (not now; only the oldest request in
        progress waits, up to ``wait_s``) or TOO_LARGE (more than the limit with what this request
        holds already). Blocks: call it from a worker thread."""
        return self.admission._reserve(self, nbytes, wait_s)

    def give_back(self, nbytes: int) -> None:
        self.held -= nbytes
        self.admission.give_back(nbytes)

    def to_queue(self, nbytes: int, enqueue: Callable[[], None]) -> None:
        """`Admission.to_queue` of ``nbytes`` this request holds."""
        self.admission.to_queue(nbytes, enqueue)
        self.held -= nbytes

    def close(self) -> None:
        """The request has ended: give back everything it still holds."""
        self.admission._close(self)


def decode_slots(ingest_workers: int) -> int:
    """Requests decoded at once: one per core (the native walk parses outside the GIL), at least
    two, and at least one per ingest worker process."""
    return max(2, os.cpu_count() or 1, ingest_workers)
