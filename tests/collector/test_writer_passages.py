"""The writer's cache of written passages: full copies are remembered as such, truncated ones
are upgraded by a later full copy, and the walk skips reading only what is in the store in full."""

from __future__ import annotations

from typing import Any

from ragtrace_collector.metrics import Metrics
from ragtrace_collector.rows import Rows
from ragtrace_collector.writer import Writer


class _Spool:
    def total_bytes(self) -> int:
        return 0

    def segments(self) -> list[int]:
        return []


def _passages(*items: tuple[str, int, bool]) -> Rows:
    rows = Rows()
    p = rows.cols["passages"]
    for h, n, truncated in items:
        p["tenant"].append("t")
        p["content_hash"].append(h)
        p["content"].append("x" * n)
        p["content_length"].append(n)
        p["truncated"].append(truncated)
        p["first_seen"].append(0)
    return rows


def test_truncated_copies_are_upgraded_and_full_ones_skipped() -> None:
    w = Writer(object(), _Spool(), Metrics())  # type: ignore[arg-type]
    new: Any = w._new_passages(_passages(("a", 5, True), ("b", 9, False)))
    w._remember_passages(new)
    assert dict(w.written_passages) == {("t", "a"): -5, ("t", "b"): 9}
    # the full text of "a" (longer) goes in; a shorter copy of "b" and the same "b" do not
    new = w._new_passages(_passages(("a", 8, False), ("b", 4, True), ("b", 9, False)))
    assert new["content_hash"] == ["a"]
    w._remember_passages(new)
    assert dict(w.written_passages) == {("t", "a"): 8, ("t", "b"): 9}
