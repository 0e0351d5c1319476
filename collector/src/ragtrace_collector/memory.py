"""Allocator settings for a process that receives multi-megabyte request bodies.

With glibc's defaults, a freed body-sized block goes back to the kernel (unmapped, or trimmed
off the heap top) and the next request faults every page of it in again: measured here, about
a third of the serving thread's CPU and a sixth of the whole collector's. Keeping up to
`TRIM_BYTES` of freed memory mapped, and serving blocks below `MMAP_BYTES` from the heap, removes
that. What is kept counts against the memory bound the collector promises, so `ragtrace serve`
keeps at most a quarter of ``--max-inflight-bytes`` (64 MiB by default: still several bodies).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os

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
