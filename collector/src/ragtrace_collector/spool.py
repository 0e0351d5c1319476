"""The durable local spool: a write-ahead log of accepted OTLP requests.

Every request is appended here *before* the collector answers 200, so an acknowledged span
survives the collector being killed (the bytes are in the kernel once ``write`` returns; with
``fsync`` on they are on disk before the answer, group-committed across concurrent requests).

Layout: ``<dir>/<NNNNNNNNNNNN>.wal`` segment files, appended in order; the highest one is open
for appends. Each record is ``RTW2 | u32 length | u32 crc32 | payload`` with payload
``u16 tenant length | u64 received ms | u8 flags | tenant | body``, the body being the protobuf
ExportTraceServiceRequest, as an LZ4 frame when flag 1 is set (OTLP bodies repeat passage text, so
they shrink several times, which is what keeps the spool from being disk-bound). A record
torn by a crash fails its length or checksum and ends the segment's replay: it was never
acknowledged (the answer is sent only after the append returns).

A segment is deleted once every record in it is in the store. The writer decides that; the
spool only counts, per segment, the records still pending.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import logging
import os
import re
import struct
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import lz4.frame

log = logging.getLogger("ragtrace.collector.spool")

MAGIC = b"RTW2"
_HEADER = struct.Struct("<4sII")
_PAYLOAD_HEAD = struct.Struct("<HQB")
FLAG_LZ4 = 1
_SEGMENT = re.compile(r"^(\d{12})\.wal$")
SEGMENT_BYTES = 32 * 1024 * 1024


class SpoolError(Exception):
    """The spool cannot take the request; the message says why and what to do."""


class SpoolFull(SpoolError):
    pass


@dataclass(frozen=True)
class SpoolRecord:
    tenant: str
    received_ms: int
    body: bytes  # serialised ExportTraceServiceRequest


class Spool:
    """Append-only segments with per-segment pending counts. Thread-safe."""

    def __init__(self, directory: str | os.PathLike[str], *, max_bytes: int, fsync: bool = True,
                 segment_bytes: int = SEGMENT_BYTES) -> None:
        self.dir = Path(directory)
        self.max_bytes = max_bytes
        self.fsync = fsync
        self.segment_bytes = segment_bytes
        self._lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self._pending: dict[int, int] = {}
        self._sizes: dict[int, int] = {}
        self._current = 0
        self._fh: object | None = None
        self._written = 0  # bytes appended to the current segment
        self._synced = 0
        # segments <= this are replayed from disk and deleted only by `delete`
        self._horizon = 0
        self._lock_fh: io.BufferedWriter | None = None

    # --- lifecycle -------------------------------------------------------------------------
    def open(self) -> int:
        """Open for appends. Returns the highest segment left by a previous run (0 if none):
        every segment up to it must be replayed into the store."""
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            probe = self.dir / ".write-test"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise SpoolError(f"the spool directory {self.dir} is not writable ({exc}); "
                             "set --spool-dir / RAGTRACE_SPOOL_DIR to a writable directory") from exc
        # One collector per spool: two writers interleaving records (or replaying each other's
        # segments) would corrupt or duplicate them. The lock dies with the process.
        self._lock_fh = open(self.dir / ".lock", "ab")  # noqa: SIM115
        try:
            fcntl.flock(self._lock_fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock_fh.close()
            self._lock_fh = None
            raise SpoolError(f"the spool directory {self.dir} is in use by another collector process; "
                             "give each collector replica its own --spool-dir / RAGTRACE_SPOOL_DIR") from None
        existing = self.segments()
        for seg in existing:
            self._sizes[seg] = (self.dir / _name(seg)).stat().st_size
        last = existing[-1] if existing else 0
        self._horizon = last
        self._open_segment(last + 1)
        return last

    def written_in_current(self) -> int:
        with self._lock:
            return self._written

    def close(self) -> None:
        with self._lock:
            fh = self._fh
            self._fh = None
            if fh is not None:
                fh.flush()  # type: ignore[attr-defined]
                if self.fsync:
                    os.fsync(fh.fileno())  # type: ignore[attr-defined]
                fh.close()  # type: ignore[attr-defined]
            # A current segment that is empty, or whose every record is in the store (a clean stop
            # after the writer flushed), leaves nothing to replay: replaying it at the next start
            # would write it all again.
            if self._written == 0 or (self._current > self._horizon and self._pending.get(self._current, 0) == 0):
                self._unlink(self._current)
            if self._lock_fh is not None:
                self._lock_fh.close()  # releases the flock
                self._lock_fh = None

    def _open_segment(self, seg: int) -> None:
        self._current = seg
        self._fh = open(self.dir / _name(seg), "ab", buffering=1024 * 1024)  # noqa: SIM115
        self._written = 0
        self._synced = 0
        self._sizes[seg] = 0
        self._pending.setdefault(seg, 0)

    # --- appends ---------------------------------------------------------------------------
    def append(self, tenant: str, received_ms: int, body: bytes, *, lz4: bool = False) -> int:
        """Write one request (``lz4``: ``body`` is already an LZ4 frame); returns its segment number
        once it is durable (see module doc)."""
        t = tenant.encode("utf-8")
        head = _PAYLOAD_HEAD.pack(len(t), received_ms, FLAG_LZ4 if lz4 else 0) + t
        size = len(head) + len(body)
        # the body (megabytes) is checksummed and written in place, never copied
        header = _HEADER.pack(MAGIC, size, zlib.crc32(body, zlib.crc32(head)))
        record_len = len(header) + size
        with self._lock:
            if self._fh is None:
                raise SpoolError("the spool is closed (the collector is shutting down)")
            if self.total_bytes() + record_len > self.max_bytes:
                raise SpoolFull(
                    f"the local spool holds {self.total_bytes()} bytes, its limit is {self.max_bytes} "
                    "(RAGTRACE_SPOOL_MAX_BYTES): the store has been unreachable for a while")
            if self._written and self._written + record_len > self.segment_bytes:
                self._rotate_locked()
            fh = self._fh
            fh.write(header)  # type: ignore[attr-defined]
            fh.write(head)  # type: ignore[attr-defined]
            fh.write(body)  # type: ignore[attr-defined]
            fh.flush()  # type: ignore[attr-defined]  # into the kernel: survives kill -9
            seg = self._current
            self._written += record_len
            self._sizes[seg] = self._written
            self._pending[seg] = self._pending.get(seg, 0) + 1
            target = self._written
        if self.fsync:
            self._sync(seg, fh, target)
        return seg

    def _sync(self, seg: int, fh: object, target: int) -> None:
        # Group commit: one fsync covers every record appended before it started.
        with self._sync_lock:
            with self._lock:
                if seg != self._current or self._synced >= target:
                    # rotated away (rotation fsyncs) or already covered by another thread
                    return
                upto = self._written
            try:
                os.fsync(fh.fileno())  # type: ignore[attr-defined]
            except (OSError, ValueError):
                return  # closed by a concurrent rotation, which synced it
            with self._lock:
                if seg == self._current:
                    self._synced = max(self._synced, upto)

    def rotate(self) -> int:
        """Close the current segment and start a new one; returns the closed segment's number."""
        with self._lock:
            return self._rotate_locked()

    def _rotate_locked(self) -> int:
        old = self._current
        fh = self._fh
        if fh is not None:
            fh.flush()  # type: ignore[attr-defined]
            if self.fsync:
                os.fsync(fh.fileno())  # type: ignore[attr-defined]
            fh.close()  # type: ignore[attr-defined]
        written = self._written
        self._open_segment(old + 1)
        if written == 0 or (old > self._horizon and self._pending.get(old, 0) == 0):
            self._unlink(old)
        return old

    # --- bookkeeping -------------------------------------------------------------------------
    def done(self, counts: dict[int, int]) -> None:
        """``counts[seg]`` records of ``seg`` are in the store; closed segments with none left go."""
        with self._lock:
            for seg, n in counts.items():
                left = self._pending.get(seg, 0) - n
                self._pending[seg] = max(0, left)
                if left <= 0 and seg != self._current and seg > self._horizon:
                    self._unlink(seg)

    def forget(self, upto: int) -> None:
        """Stop counting segments ``<= upto``: they will be replayed from disk instead."""
        with self._lock:
            self._horizon = max(self._horizon, upto)
            for seg in [s for s in self._pending if s <= upto]:
                del self._pending[seg]

    def delete(self, seg: int) -> None:
        with self._lock:
            if seg != self._current:
                self._unlink(seg)

    def _unlink(self, seg: int) -> None:
        self._pending.pop(seg, None)
        self._sizes.pop(seg, None)
        with contextlib.suppress(FileNotFoundError):
            (self.dir / _name(seg)).unlink()

    def segments(self) -> list[int]:
        return sorted(int(m.group(1)) for p in self.dir.iterdir() if (m := _SEGMENT.match(p.name)))

    def total_bytes(self) -> int:
        return sum(self._sizes.values())

    @property
    def current(self) -> int:
        return self._current

    def read(self, seg: int) -> Iterator[SpoolRecord]:
        """Records of one segment in order; stops at a torn or corrupt tail."""
        path = self.dir / _name(seg)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return
        pos = 0
        while pos + _HEADER.size <= len(data):
            magic, length, crc = _HEADER.unpack_from(data, pos)
            start = pos + _HEADER.size
            payload = data[start : start + length]
            if magic != MAGIC or len(payload) != length or zlib.crc32(payload) != crc:
                log.warning("spool segment %s: torn or corrupt record at byte %d; the rest is skipped "
                            "(it was never acknowledged)", path, pos)
                return
            tlen, received, flags = _PAYLOAD_HEAD.unpack_from(payload, 0)
            head = _PAYLOAD_HEAD.size
            tenant = payload[head : head + tlen].decode("utf-8")
            body = payload[head + tlen :]
            yield SpoolRecord(tenant, received, lz4.frame.decompress(body) if flags & FLAG_LZ4 else body)
            pos = start + length


def _name(seg: int) -> str:
    return f"{seg:012d}.wal"
