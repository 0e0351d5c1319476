"""The write-ahead spool on a real filesystem: records, torn tails, segment lifecycle, limits."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ragtrace_collector.spool import Spool, SpoolError, SpoolFull


def test_records_round_trip_and_survive_a_killed_writer(tmp_path: Path) -> None:
    # The writer process appends, then dies without closing anything (os._exit skips every
    # cleanup, like kill -9 after the append returned).
    code = (
        "import os, sys\n"
        "from ragtrace_collector.spool import Spool\n"
        f"sp = Spool({str(tmp_path)!r}, max_bytes=1 << 20, fsync=True)\n"
        "sp.open()\n"
        "seg = sp.append('tenant-ä', 123, b'\\x00body\\xff')\n"
        "sp.append('t2', 456, b'')\n"
        "print(seg, flush=True)\n"
        "os._exit(0)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    seg = int(out.stdout)
    again = Spool(tmp_path, max_bytes=1 << 20)
    assert again.open() == seg
    got = [(r.tenant, r.received_ms, r.body) for r in again.read(seg)]
    assert got == [("tenant-ä", 123, b"\x00body\xff"), ("t2", 456, b"")]
    again.close()


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


def test_one_collector_per_spool_directory(tmp_path: Path) -> None:
    first = Spool(tmp_path, max_bytes=1 << 20, fsync=False)
    first.open()
    with pytest.raises(SpoolError, match="own --spool-dir"):
        Spool(tmp_path, max_bytes=1 << 20).open()
    first.close()
    second = Spool(tmp_path, max_bytes=1 << 20)
    second.open()  # free again once the first is closed
    second.close()


def test_lz4_bodies_are_stored_compressed_and_read_back_plain(tmp_path: Path) -> None:
    import lz4.frame

    body = b"passage text " * 10_000
    sp = Spool(tmp_path, max_bytes=1 << 20, fsync=False)
    sp.open()
    seg = sp.append("t", 7, lz4.frame.compress(body), lz4=True)
    sp.append("t", 8, b"plain")
    sp.close()
    assert (tmp_path / f"{seg:012d}.wal").stat().st_size < len(body) // 10
    assert [r.body for r in Spool(tmp_path, max_bytes=1 << 20).read(seg)] == [body, b"plain"]
