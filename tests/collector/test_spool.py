"""The write-ahead spool on a real filesystem: records, torn tails, segment lifecycle, limits."""

from __future__ import annotations

from pathlib import Path

import pytest
from ragtrace_collector.spool import Spool, SpoolError, SpoolFull


def test_records_round_trip_and_survive_reopening(tmp_path: Path) -> None:
    sp = Spool(tmp_path, max_bytes=1 << 20, fsync=True)
    assert sp.open() == 0
    seg = sp.append("tenant-ä", 123, b"\x00body\xff")
    sp.append("t2", 456, b"")
    # no close(): the process "dies" here; the bytes are already in the kernel
    again = Spool(tmp_path, max_bytes=1 << 20)
    assert again.open() == seg
    got = [(r.tenant, r.received_ms, r.body) for r in again.read(seg)]
    assert got == [("tenant-ä", 123, b"\x00body\xff"), ("t2", 456, b"")]


def test_a_torn_tail_ends_the_replay_without_losing_earlier_records(tmp_path: Path) -> None:
    sp = Spool(tmp_path, max_bytes=1 << 20, fsync=False)
    sp.open()
    seg = sp.append("t", 1, b"first")
    sp.append("t", 2, b"second")
    sp.close()
    path = tmp_path / f"{seg:012d}.wal"
    data = path.read_bytes()
    path.write_bytes(data[:-3])  # a crash in the middle of the last write
    assert [r.body for r in Spool(tmp_path, max_bytes=1 << 20).read(seg)] == [b"first"]
    path.write_bytes(data[:10] + b"X" + data[11:])  # a flipped byte in the first record
    assert list(Spool(tmp_path, max_bytes=1 << 20).read(seg)) == []


def test_segments_go_once_their_records_are_stored(tmp_path: Path) -> None:
    sp = Spool(tmp_path, max_bytes=1 << 20, fsync=False, segment_bytes=100)
    sp.open()
    a = sp.append("t", 1, b"x" * 60)
    b = sp.append("t", 2, b"y" * 60)  # does not fit: a new segment
    assert b == a + 1 and sp.segments() == [a, b]
    sp.done({a: 1})
    assert sp.segments() == [b]  # closed and empty of pending records
    sp.done({b: 1})
    assert sp.segments() == [b]  # still the open segment
    assert sp.rotate() == b and sp.segments() == [b + 1]  # rotated out with nothing pending: gone


def test_forgotten_segments_wait_for_replay(tmp_path: Path) -> None:
    sp = Spool(tmp_path, max_bytes=1 << 20, fsync=False)
    sp.open()
    a = sp.append("t", 1, b"x")
    closed = sp.rotate()
    sp.forget(closed)
    sp.done({a: 1})  # a late acknowledgement must not delete what replay still needs
    assert a in sp.segments()
    sp.delete(a)
    assert a not in sp.segments()


def test_limits_and_errors(tmp_path: Path) -> None:
    sp = Spool(tmp_path, max_bytes=100, fsync=False)
    sp.open()
    sp.append("t", 1, b"x" * 50)
    with pytest.raises(SpoolFull, match="RAGTRACE_SPOOL_MAX_BYTES"):
        sp.append("t", 2, b"x" * 50)
    sp.close()
    with pytest.raises(SpoolError, match="closed"):
        sp.append("t", 3, b"")
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(SpoolError, match="RAGTRACE_SPOOL_DIR"):
        Spool(blocker / "sub", max_bytes=10).open()
