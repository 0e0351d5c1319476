"""Byte-bounded slices of one insert into the embedded engine.

The engine's working memory for one ``INSERT ... SELECT ... FROM Python(table)`` grows with the bytes it
is given, at several times their size (it copies the Arrow columns into its own, sorts them by the
table's key, and compresses and writes every column of the new part before it lets go of any), and the
process holds the Python rows and their Arrow copy beside it. So an embedded insert of more than
`SLICE_BYTES` goes in as several statements of at most that many bytes each, converted to Arrow one
slice at a time (a row larger than the bound goes alone), and after each slice the engine hands its
freed pages back (its allocator would keep them for seconds). Batches of ordinary traces stay one
statement per table.

A sliced insert is not atomic: a slice may fail after earlier ones went in. Writing those rows again
is harmless — every table is a ReplacingMergeTree keyed by span, trace or content hash, readers keep
one row per key (`ragtrace_store.roots`), and a row written twice is the same row (the collector keeps
a request's receive time when it writes it again) — so the collector's writer retries or replays the
whole batch.

Sizes are estimates of the column data, not exact Arrow sizes: a string counts its length in code
points, a list its elements, any other value `FIXED_BYTES`, and every value `FIXED_BYTES` besides for
its offset or slot. They only decide where to cut.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping, Sequence
from itertools import accumulate
from typing import Any

#: column bytes per INSERT statement of the embedded engine at most. Chosen by measurement
#: (``benchmarks/hostile_server.py --only insert-slices``, the peak over the rows of inserting the 128 MiB
#: of rows of a 64 MiB request of 64 KB values): one statement per table +357 MiB; slices of 64, 32, 16,
#: 8 MiB +157, +126, +82, +63 MiB. Not smaller: the largest table of a full batch of ordinary traces
#: (8,000 spans: 27 MB of documents) stays one statement, and each slice is a part the engine merges
#: later (merging parts of large values holds about 20 MiB per part).
SLICE_BYTES = 32 * 1024 * 1024
#: what a value that is not a string or a list counts, and what each value counts besides
FIXED_BYTES = 8


def column_bytes(values: Sequence[Any]) -> int:
    """The estimated bytes of one column of Python values (see the module doc)."""
    if not values:
        return 0
    if isinstance(values[0], str | bytes | list):
        try:
            return sum(map(len, values)) + FIXED_BYTES * len(values)
        except TypeError:  # None among the strings (a Nullable column)
            pass
    elif values[0] is not None:
        return 2 * FIXED_BYTES * len(values)  # numbers and times: fixed width
    return sum(map(_value_bytes, values))


def _value_bytes(value: Any) -> int:
    return FIXED_BYTES + (len(value) if isinstance(value, str | bytes | list) else FIXED_BYTES)


def row_bytes(columns: Mapping[str, Sequence[Any]]) -> list[int]:
    """The estimated bytes of each row of equally long columns."""
    sizes: list[int] | None = None
    for values in columns.values():
        if not values:
            continue
        if values[0] is not None and not isinstance(values[0], str | bytes | list):
            column = [2 * FIXED_BYTES] * len(values)
        else:
            column = list(map(_value_bytes, values))
        sizes = column if sizes is None else list(map(int.__add__, sizes, column))
    return sizes or []


def table_row_bytes(table: Any) -> list[int]:
    """The bytes of each row of an Arrow table: strings and binaries their lengths, lists their
    elements times the element width (`FIXED_BYTES` for strings), fixed-width types their width."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = int(table.num_rows)
    total = pa.array([0] * n, pa.int64())
    for column in table.columns:
        kind = column.type
        if pa.types.is_string(kind) or pa.types.is_binary(kind) or pa.types.is_large_string(kind):
            size = pc.fill_null(pc.binary_length(column), 0)
        elif pa.types.is_list(kind) or pa.types.is_large_list(kind):
            width = kind.value_type.bit_width // 8 if pa.types.is_primitive(kind.value_type) else FIXED_BYTES
            size = pc.multiply(pc.fill_null(pc.list_value_length(column), 0), width)
        else:
            size = pa.array([max(1, kind.bit_width // 8) if pa.types.is_primitive(kind) else FIXED_BYTES] * n,
                            pa.int64())
        total = pc.add(total, pc.add(pc.cast(size, pa.int64()), FIXED_BYTES))
    return [int(v) for v in total.to_pylist()]


def slices(sizes: Sequence[int], limit: int = SLICE_BYTES) -> list[tuple[int, int]]:
    """Consecutive ``(start, end)`` row ranges covering every row once, each of at most ``limit`` bytes
    by ``sizes`` (the bytes of each row), or of one row when that row alone is larger. About even: each
    slice becomes a part of the table, and a sliver of a part is one more part to merge."""
    ends = list(accumulate(sizes))
    if not ends:
        return []
    total = ends[-1]
    target = -(-total // -(-total // limit)) if total > limit else limit  # the total over the fewest slices
    bounds: list[tuple[int, int]] = []
    start = done = 0
    while start < len(ends):
        end = max(start + 1, bisect_right(ends, done + target, lo=start))
        bounds.append((start, end))
        start, done = end, ends[end - 1]
    if len(bounds) > 1:  # a sliver left at the end joins the slice before it when both fit the limit
        (a, _), (_, d) = bounds[-2], bounds[-1]
        if ends[d - 1] - (ends[a - 1] if a else 0) <= limit:
            bounds[-2:] = [(a, d)]
    return bounds
