"""The store's answer to "which traces does this sample choose": deterministic sampling and
sharding by trace-id hash, computed in the engine (`sample_traces`; the audit's options are read in
`ragtrace_evaluator.audit.sampling`).

Every trace has a unit ``u``, a number the engine computes from its id alone, so a sample is a
property of the ids, not of the run: reruns, machines and shards agree.

- ``rate=F`` keeps the traces with ``u`` below F of the unit's range (nested: the 10 % sample is
  inside the 20 % sample).
- ``sample=N`` keeps the N traces with the smallest ``u`` (bottom-N), per stratum when
  ``stratify`` names columns (``release``, ``route``): N per stratum, so a rare release or route
  gets as many traces as a busy one.
- ``shard=(i, n)`` then keeps the traces whose *second*, salted hash falls in shard ``i`` of
  ``n``, so shards are balanced whatever the sample, and the union of shards 0..n-1 is exactly the
  unsharded sample (every shard computes the same sample and keeps its part).

Strata and filters are those of each trace's winning root row (`ragtrace_store.roots`; for a time
window, among its root rows within five minutes of the window, `ragtrace_store.roots.window_band`), and
only queries are sampled: the winners are decided among the root rows that can be queries
(`ragtrace_store.query_roots`), as every listing of queries decides them, so the sample is what
`read_traces` then reads, and roots that are not queries are never read (neither counted nor made
into strata).

Python receives only the chosen ids. Without strata the selection is first tried as one query
(`_one_query`): the winners of the traces in the rate's range of ``u`` (all of it for a sample),
within the time window's band, the first N by ``u``, and the candidates' count beside them (a sample
of N decides winners first only in the part of ``u``'s range sized from that count to hold about
1.25 N + 20 candidates, and reads the whole range only if that part held fewer than N). One
query, because at the sizes an audit usually reads (a rate of a month, the last hour) a second
round trip and a second planning of the same read cost as much as the read itself. Its engine
memory is bounded by settings (at most `SLICE_ROWS` rows sorted, and as many in a set): a selection
over more rows than that is stopped by the engine before it grows, and done in rounds instead.

The rounds run over slices of ``u``: per stratum, the rows of the traces whose ``u`` falls in the
stratum's next slice are read (by hash, which the ``by_hash`` projection of migration 0005 keeps
sorted), their winners decided, and the stratum is finished once N of them match or its slice
reaches the end of the range. The first slice is sized from the stratum's row count to hold about
1.25 N + 20 traces, so one round usually does; a slice never covers more than `SLICE_ROWS` rows,
which bounds the engine's memory whatever the traffic.

Sampler versions (`SAMPLERS`; the audit's manifest records the one used, ``sampler`` in
`ragtrace_evaluator.manifest`):

1. ``u`` = the first 8 bytes of sha256(trace_id), big-endian, / 2^64 as a double; shard =
   ``int(u' * n)`` with ``u'`` from sha256("ragtrace-shard:" + trace_id). This is what the audit
   computed in Python before the engine did; the engine computes the same numbers (SHA256), so
   ``sampler=1`` reproduces a sample of a manifest that names no sampler, at the cost of hashing
   every row with SHA256 (about 5x xxHash64) and no projection.
2. ``u`` = xxHash64(trace_id) (an integer in [0, 2^64)); shard = xxHash64("ragtrace-shard:" +
   trace_id) mod n. The default.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from ragtrace_store.errors import StoreError
from ragtrace_store.filters import TraceFilter
from ragtrace_store.query_roots import QUERY_ROOTS
from ragtrace_store.roots import TRACE_HASH, rows_of, window_band, winners_sql

if TYPE_CHECKING:
    from ragtrace_store.client import Store

__all__ = ["SAMPLERS", "SAMPLER_VERSION", "SLICE_ROWS", "STRATA", "Sample", "SamplePlan", "Sampler", "SamplingError",
           "sample_traces"]

STRATA = ("release", "route")
SAMPLER_VERSION = 2
#: at most this many root rows per stratum in one round's slice (the engine's memory per round)
SLICE_ROWS = 200_000
#: a sample of N reads first the share of u's range that should hold a * N + b of its candidates
_FIRST_SLICE = (1.25, 20)
_SHARD_SALT = "ragtrace-shard:"


class SamplingError(StoreError, ValueError):
    """Invalid sampling options; the message names the option and the fix."""


@dataclass(frozen=True)
class Sampler:
    """How one sampler version computes ``u`` and the shard of a trace, as SQL over ``trace_id``."""

    version: int
    #: SQL: the unit of a trace; the sample is ordered by (unit, trace_id)
    unit: str
    #: the ClickHouse type of `unit` (how slice bounds are bound)
    unit_type: str
    #: SQL condition: the trace is in shard ``{shard_i:UInt32}`` of ``{shard_n:UInt32}``
    shard: str
    #: what the manifest records
    description: str

    @property
    def integral(self) -> bool:
        return self.unit_type == "UInt64"

    @property
    def top(self) -> int | float:
        """The largest value ``unit`` can take."""
        return 2**64 - 1 if self.integral else 1.0

    def rate_top(self, rate: float) -> int | float:
        """The largest unit inside a ``rate`` sample (``u < rate`` of the range)."""
        if rate >= 1.0:
            return self.top
        if self.integral:
            return math.ceil(Fraction(rate) * 2**64) - 1
        return math.nextafter(rate, 0.0)

    def manifest(self) -> dict[str, Any]:
        return {"version": self.version, "unit": self.unit, "shard": self.shard, "description": self.description}


def _sha_u(expr: str) -> str:
    return f"toFloat64(reinterpretAsUInt64(reverse(substring(SHA256({expr}), 1, 8)))) / exp2(64)"


_SALTED = f"concat('{_SHARD_SALT}', trace_id)"
SAMPLERS: dict[int, Sampler] = {
    1: Sampler(1, _sha_u("trace_id"), "Float64",
               f"toUInt32({_sha_u(_SALTED)} * {{shard_n:UInt32}}) = {{shard_i:UInt32}}",
               "sha256(trace_id)[:8] big-endian / 2^64 (the audit's Python sampler before the engine sampled)"),
    2: Sampler(2, TRACE_HASH, "UInt64",
               f"xxHash64({_SALTED}) % {{shard_n:UInt32}} = {{shard_i:UInt32}}",
               "xxHash64(trace_id), XXH64 seed 0; shard xxHash64('ragtrace-shard:' || trace_id) mod n"),
}


@dataclass(frozen=True)
class SamplePlan:
    """What to sample: ``sample`` traces (per stratum of ``stratify``) or a ``rate`` of them (neither:
    every trace), this ``shard`` ``(i, n)`` of the sample, by sampler version ``sampler``. Checked when
    made; the messages name the audit's options (``--sample``, ``--rate``, ...)."""

    sample: int | None = None
    rate: float | None = None
    stratify: tuple[str, ...] = ()
    shard: tuple[int, int] | None = None
    sampler: int = SAMPLER_VERSION

    def __post_init__(self) -> None:
        if self.sample is not None and self.rate is not None:
            raise SamplingError("give --sample N or --rate F, not both")
        if self.sample is not None and self.sample < 1:
            raise SamplingError(f"--sample {self.sample}: must be >= 1")
        if self.rate is not None and not 0.0 < self.rate <= 1.0:
            raise SamplingError(f"--rate {self.rate}: must be in (0, 1]")
        for col in self.stratify:
            if col not in STRATA:
                raise SamplingError(f"--stratify {col!r}: use one or more of {', '.join(STRATA)}")
        if len(set(self.stratify)) != len(self.stratify):
            raise SamplingError(f"--stratify {','.join(self.stratify)}: name each column once")
        if self.shard is not None:
            i, n = self.shard
            if n < 1 or not 0 <= i < n:
                raise SamplingError(f"--shard {i}/{n}: need n >= 1 and 0 <= i < n")
        if self.sampler not in SAMPLERS:
            raise SamplingError(f"--sampler {self.sampler}: use one of {', '.join(map(str, SAMPLERS))} "
                                f"({SAMPLER_VERSION} is the default; 1 reproduces samples of manifests that name "
                                "no sampler)")


@dataclass
class _Stratum:
    rows: int  # root rows matching the filters (a bound on its traces)
    lo: int | float = 0
    hi: int | float = 0
    found: int = 0  # chosen so far, all shards
    picked: list[tuple[Any, str]] = field(default_factory=list)  # chosen in this shard: (u, trace_id)
    done: bool = False


@dataclass(frozen=True)
class Sample:
    """The chosen trace ids (this shard's, ordered by unit then id) and what it took."""

    trace_ids: list[str]
    #: root rows matching the filters (an upper bound on the traces: rows a retry or a second root
    #: claimant left, not yet merged, count again)
    candidate_rows: int
    #: chosen traces per stratum, all shards (key: the stratum's values in ``stratify`` order)
    per_stratum: dict[tuple[str, ...], int]
    rounds: int


def sample_traces(store: Store, flt: TraceFilter, plan: SamplePlan) -> Sample:
    """The traces ``plan`` chooses among the queries matching ``flt`` (see the module docstring)."""
    if flt.trace_ids is not None:
        raise SamplingError("sample_traces: sample by filters, not by a list of trace ids")
    sampler = SAMPLERS[plan.sampler]
    strata = plan.stratify if plan.sample is not None else ()
    # a stratum is the tuple of its columns' values (a constant tuple when there are none)
    key = f"tuple({', '.join(strata)})" if strata else "tuple(toUInt8(0))"
    where, params = flt.conditions()
    if not strata:
        one = _one_query(store, sampler, flt, plan, where, params)
        if one is not None:
            return one
    # grouped by the columns themselves (an array key per row costs four times as much here)
    cols = ", ".join(strata)
    # the strata and their sizes among the root rows that can be queries (`query_roots`): a stratum
    # of roots that are not (a flood of spans without a release) is never read
    counts = store.query_rows(f"SELECT {cols + ', ' if strata else ''}count() FROM {store.table(QUERY_ROOTS)} "
                              f"WHERE {' AND '.join(where)}{' GROUP BY ' + cols if strata else ''}", params)
    state = {tuple(str(v) for v in r[:-1]): _Stratum(rows=int(r[-1])) for r in counts if r[-1]}
    top = sampler.rate_top(plan.rate) if plan.rate is not None else sampler.top
    for st in state.values():
        st.hi = _slice_end(sampler, st, 0, top, plan.sample, first=True)
    rounds = 0
    while pending := [k for k, st in state.items() if not st.done]:
        rounds += 1
        _round(store, sampler, flt, plan, strata, key, pending, state, where, params)
        for k in pending:
            st = state[k]
            if (plan.sample is not None and st.found >= plan.sample) or st.hi >= top:
                st.done = True
            else:
                start = st.hi + 1 if sampler.integral else math.nextafter(st.hi, math.inf)
                # nothing of this stratum's rows won a trace so far (a gateway's rows under another
                # release): the rest of its rows at once, as far as the budget allows
                width = top if st.found == 0 else st.hi - st.lo
                st.lo, st.hi = start, _slice_end(sampler, st, start, top, plan.sample, first=False, width=width)
    chosen = sorted(p for st in state.values() for p in st.picked)
    return Sample([t for _u, t in chosen], sum(st.rows for st in state.values()),
                  {k: st.found for k, st in state.items()}, rounds)


#: the engine's error names for a query stopped by the limits `_one_query` sets
_OVER_LIMIT = ("TOO_MANY_ROWS", "SET_SIZE_LIMIT_EXCEEDED")


def _one_query(store: Store, sampler: Sampler, flt: TraceFilter, plan: SamplePlan, where: list[str],
               params: dict[str, Any]) -> Sample | None:
    """The selection without strata as one query, or None when the engine stopped it for reading
    more than `SLICE_ROWS` rows (then the counted rounds choose the same traces)."""
    t, unit = sampler.unit_type, sampler.unit
    top = sampler.rate_top(plan.rate) if plan.rate is not None else sampler.top
    p = {**params, "s_hi_max": top}
    # a rate below 1 is a range of u: a condition on the trace id, so every row of its traces
    bounds = [] if top == sampler.top else [f"{unit} <= {{s_hi_max:{t}}}"]
    used = {c for c, v in (("service", flt.service), ("release", flt.release), ("route", flt.route)) if v is not None}
    if flt.since is not None or flt.until is not None:
        used.add("start_time")
    on_winner = where[1:]  # the tenant is a condition on the trace id, met by every row read

    if plan.shard is not None:
        p["shard_i"], p["shard_n"] = plan.shard
    # this shard's part of the chosen (all shards choose the same traces, each keeps its own)
    # ordered by (u, trace_id) in the engine: sorting 10,000 pairs there is a fraction of what Python takes
    part = f"groupArrayIf((u, trace_id), {sampler.shard})" if plan.shard is not None else "groupArray((u, trace_id))"
    first = f" ORDER BY u, trace_id LIMIT {int(plan.sample)}" if plan.sample is not None else ""

    # A sample of N first takes the traces in the part of u's range that should hold about 1.25 N + 20
    # of the candidates (`_FIRST_SLICE`, as a round's first slice), a condition on the trace id the
    # engine sizes from the candidates' count it computes anyway: the winners are then decided for those
    # traces' rows only, not the whole window's. If fewer than N of them are chosen (and the part was
    # not the whole range) the query runs again over the whole range: the N smallest u are the same.
    share = (f"(({_FIRST_SLICE[0]} * {int(plan.sample)} + {_FIRST_SLICE[1]}) / greatest(candidates, 1))"
             if plan.sample is not None else "1")
    narrowed = f"{unit} <= " + (f"if({share} >= 1, {{s_hi_max:{t}}}, toUInt64({share} * exp2(64)))"
                                if sampler.integral else f"least({share}, {{s_hi_max:{t}}})")

    values = any(v is not None for v in (flt.service, flt.release, flt.route))

    def chosen(narrow: bool) -> list[tuple[Any, ...]]:
        # Which rows decide the winners: the root rows that can be queries (`query_roots`), in the
        # range of u read (a condition on the trace id: every such row of its traces, through the
        # by_hash projection) and the window's band. A filter on a row's values: those of the
        # traces with a matching row (`rows_of`). A time window alone: every row in its band, the
        # same winners (a trace whose winner is in the window has a row in it).
        cut = [*bounds, *([narrowed] if narrow else [])]
        read = [*([rows_of(store, [*where, *cut], table=QUERY_ROOTS)] if values else []), *window_band(flt), *cut]
        winners = winners_sql(store, tuple(c for c in ("service", "release", "route", "start_time") if c in used)
                              or ("root_priority",), ["tenant = {tenant:String}", *read], by_sort=True,
                              table=QUERY_ROOTS)
        # candidates: the root rows that can be queries matching the filters, as the rounds count
        # them (the engine keeps the whole table's count; a window's is a read of the window)
        return list(store.query_rows(
            f"WITH (SELECT count() FROM {store.table(QUERY_ROOTS)} WHERE {' AND '.join(where)}) AS candidates "
            f"SELECT candidates, count(), arrayMap(x -> x.2, arraySort({part})), {share} >= 1 "
            f"FROM (SELECT trace_id, {unit} AS u FROM ({winners})"
            f"{' WHERE ' + ' AND '.join(on_winner) if on_winner else ''}{first}) "
            f"SETTINGS max_rows_to_sort = {SLICE_ROWS}, sort_overflow_mode = 'throw', "
            f"max_rows_in_set = {SLICE_ROWS}, set_overflow_mode = 'throw'", p))

    try:
        rows = chosen(plan.sample is not None)
        if plan.sample is not None and rows[0][1] < plan.sample and not rows[0][3]:
            rows = chosen(False)  # the part of the range held fewer than N: the whole range
    except Exception as exc:
        if any(name in str(exc) for name in _OVER_LIMIT):
            return None
        raise
    candidates, found, ids, _whole = rows[0]
    return Sample(list(ids), int(candidates), {(): int(found)} if candidates else {}, 1)


def _slice_end(sampler: Sampler, st: _Stratum, start: int | float, top: int | float, n: int | None, *,
               first: bool, width: int | float = 0) -> int | float:
    """The inclusive end of a stratum's next slice: the first sized to hold ~1.25 N + 20 traces (all
    of a rate), each later one four times the previous; never more than `SLICE_ROWS` rows."""
    span = 2**64 if sampler.integral else 1.0
    budget = span * min(1.0, SLICE_ROWS / max(st.rows, 1))
    if first:
        want = span * min(1.0, (_FIRST_SLICE[0] * n + _FIRST_SLICE[1]) / max(st.rows, 1)) if n is not None else span
    else:
        want = 4 * (width + (1 if sampler.integral else 0.0))
    size = min(want, budget)
    end = start + (int(size) - 1 if sampler.integral else size)
    return min(max(end, start), top)


def _round(store: Store, sampler: Sampler, flt: TraceFilter, plan: SamplePlan, strata: tuple[str, ...], key: str,
           pending: Sequence[tuple[str, ...]], state: dict[tuple[str, ...], _Stratum],
           where: list[str], params: dict[str, Any]) -> None:
    """One slice of every pending stratum: its traces' winners, filtered, the first (N - found)."""
    t, unit = sampler.unit_type, sampler.unit
    p = {**params, "s_keys": [k if strata else (0,) for k in pending], "s_lo": [state[k].lo for k in pending],
         "s_hi": [state[k].hi for k in pending], "s_lo_min": min(state[k].lo for k in pending),
         "s_hi_max": max(state[k].hi for k in pending),
         "s_quota": [max(0, plan.sample - state[k].found) if plan.sample is not None else 2**63 for k in pending]}
    # the overall bounds let the engine read only that range of the by_hash projection
    bounds = [f"{unit} >= {{s_lo_min:{t}}}", f"{unit} <= {{s_hi_max:{t}}}"]
    if strata:
        # the stratum of a row (of the winning row, in the outer query: same column names)
        idx = f"indexOf({{s_keys:Array(Tuple({', '.join(['String'] * len(strata))}))}}, {key})"
        in_slice = f"({idx} > 0 AND {unit} >= {{s_lo:Array({t})}}[{idx}] AND {unit} <= {{s_hi:Array({t})}}[{idx}])"
        row_where = [*where, *bounds, in_slice]
    else:
        # one stratum: its slice is the overall bounds (an array lookup per row cost a third more)
        idx, in_slice = "1", f"({' AND '.join(bounds)})"
        row_where = [*where, *bounds]
    for i, col in enumerate(strata):  # cheap on a LowCardinality column, so the engine filters by it first
        p[f"s_in_{i}"] = sorted({k[i] for k in pending})
        row_where.insert(len(where), f"{col} IN {{s_in_{i}:Array(String)}}")
    shard = "1"
    if plan.shard is not None:
        p["shard_i"], p["shard_n"] = plan.shard
        shard = sampler.shard
    # The winners are decided among the root rows that can be queries (`query_roots`). Without
    # filters or strata the slice is a condition on the trace id alone: every such row of its traces
    # is in it, so no second read of their rows; else all rows of the traces with a row in the slice
    # (with the slice's bounds on that read too: a range of the by_hash projection).
    traces = ([rows_of(store, row_where, table=QUERY_ROOTS), *bounds, *window_band(flt)] if strata or len(where) > 1
              else row_where[1:])
    # only the winning row's columns this round reads (its filters', its strata's): each column more
    # is read for every row of the slice
    used = {c for c, v in (("service", flt.service), ("release", flt.release), ("route", flt.route)) if v is not None}
    if flt.since is not None or flt.until is not None:
        used.add("start_time")
    columns = tuple(c for c in ("service", "release", "route", "start_time") if c in used or c in strata)
    winners = winners_sql(store, columns or ("root_priority",), ["tenant = {tenant:String}", *traces],
                          table=QUERY_ROOTS)
    # a rate takes every trace of its slice: no quota, no ranking
    rank, keep = (("row_number() OVER (PARTITION BY k ORDER BY u, trace_id) AS rn", "WHERE rn <= quota")
                  if plan.sample is not None else ("0 AS rn", ""))
    rows = store.query_rows(
        # two arrays of plain values: several times cheaper to hand over than an array of pairs
        "SELECT k, count(), groupArrayIf(u, in_shard), groupArrayIf(trace_id, in_shard) FROM ("
        f"SELECT trace_id, {unit} AS u, {key} AS k, {shard} AS in_shard, "
        f"{{s_quota:Array(UInt64)}}[{idx}] AS quota, {rank} "
        f"FROM ({winners}) WHERE {' AND '.join(where)} AND {in_slice}) {keep} GROUP BY k", p)
    for k, n, units, ids in rows:
        st = state[tuple(str(v) for v in k) if strata else ()]
        st.found += int(n)
        st.picked.extend(zip(units, ids, strict=True))
