"""Allocator settings for a process that receives multi-megabyte request bodies, and giving memory back
after large work.

With glibc's defaults, a freed body-sized block goes back to the kernel (unmapped, or trimmed
off the heap top) and the next request faults every page of it in again: measured here, about
a third of the serving thread's CPU and a sixth of the whole collector's. Keeping up to
`TRIM_BYTES` of freed memory mapped, and serving blocks below `MMAP_BYTES` from the heap, removes
that. What is kept counts against the memory bound the collector promises, so `ragtrace serve`
keeps at most a quarter of ``--max-inflight-bytes`` (128 MiB by default: still several bodies).

That setting only trims the top of the main heap. The memory a large request frees (its decode, its
rows once written) is spread over the heaps of several threads, and each allocator keeps it: glibc's
(Python objects, the protobuf parse), Arrow's, the engine's. Measured on 64 MiB requests of 64 KB values,
a collector at rest at 367 MB still held 949 MB after one such request was answered and written, and a
second request decoding beside the first one's insert added to that instead of reusing it. So after work
that freed at least `GIVE_BACK_BYTES`, `GiveBack` hands freed memory back to the system: glibc's
``malloc_trim(0)``, Arrow's pool, and the engine's allocator where the caller names it (10-50 ms; at most
once per `GIVE_BACK_INTERVAL_S`, and never for ordinary requests, which free less).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import threading
import time
from collections.abc import Callable

from ragtrace_collector.metrics import Metrics

log = logging.getLogger("ragtrace.collector.memory")

# mallopt(3) parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_BYTES = 32 * 1024 * 1024  # glibc's ceiling for this setting on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX)
TRIM_BYTES = 256 * 1024 * 1024


def keep_freed_memory(trim_bytes: int = TRIM_BYTES) -> bool:
    """Apply the settings on glibc (a no-op elsewhere, or when the MALLOC_* variables say otherwise),
    keeping up to ``trim_bytes`` freed (at most `TRIM_BYTES`). Returns whether they were applied."""
    if "MALLOC_TRIM_THRESHOLD_" in os.environ or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False  # the operator chose
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return False  # not glibc (musl has no mallopt)
    ok = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_BYTES)) and bool(mallopt(_M_TRIM_THRESHOLD, min(trim_bytes, TRIM_BYTES)))
    if not ok:
        log.debug("mallopt refused the settings; keeping the allocator's defaults")
    return ok


#: work that freed at least this much (a request that held its body and decode, a written batch's rows)
#: gives memory back: a request of about 16 MB or more, a batch of 20,000 spans of ordinary traces; the
#: SDK's exports (512 spans by default) never do
GIVE_BACK_BYTES = 64 * 1024 * 1024
#: seconds between two give-backs at least (each walks every heap: 10-50 ms)
GIVE_BACK_INTERVAL_S = 0.25


class GiveBack:
    """Hands freed memory back to the system after large work (see the module doc), in a thread of its
    own: `after` only asks (it never blocks, so the event loop may call it), and asks that come while a
    give-back runs or within `GIVE_BACK_INTERVAL_S` of the last are served by one more give-back then.
    ``engine`` returns the store engine's freed memory and must not block (`Store.release_memory` does
    nothing while a statement runs)."""

    def __init__(self, engine: Callable[[], object] | None = None, *, metrics: Metrics | None = None,
                 min_bytes: int = GIVE_BACK_BYTES, interval: float = GIVE_BACK_INTERVAL_S) -> None:
        self.engine = engine
        self.metrics = metrics
        self.min_bytes = min_bytes
        self.interval = interval
        #: give-backs done so far
        self.count = 0
        self._due = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._trim = _malloc_trim()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="ragtrace-give-back", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping = True
        self._due.set()

    def after(self, freed: int) -> bool:
        """Work that freed ``freed`` bytes has ended: ask for a give-back if that is large. Returns
        whether it asked."""
        if freed < self.min_bytes:
            return False
        self._due.set()
        return True

    def _run(self) -> None:
        while True:
            self._due.wait()
            if self._stopping:
                return
            self._due.clear()
            try:
                self.give_back_now()
            except Exception:  # never let the thread die over a failed trim
                log.exception("giving memory back failed")
            time.sleep(self.interval)  # the rate limit: work asked for meanwhile waits for the next round

    def give_back_now(self) -> None:
        """glibc's ``malloc_trim(0)``, Arrow's pool, then the engine's."""
        if self._trim is not None:
            self._trim(0)
        try:
            import pyarrow as pa

            pa.default_memory_pool().release_unused()
        except (ImportError, AttributeError):  # no Arrow, or a pyarrow without release_unused
            pass
        if self.engine is not None:
            self.engine()
        self.count += 1
        if self.metrics is not None:
            self.metrics.inc("ragtrace_memory_give_backs_total")


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None on another C library (musl has none)."""
    name = ctypes.util.find_library("c")
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError, TypeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim
