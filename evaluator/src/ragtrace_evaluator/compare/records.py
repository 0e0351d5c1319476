"""The per-query labels that `ragtrace compare` reads: from JSON Lines files or from the store.

Both sources carry the per-trace record of the shared contract, `ragtrace_store.LabelRecord`
(what `ragtrace audit --per-trace` writes and what the `labels` table holds); a record with a
``failure_mode`` is read as one, by `LabelRecord.from_json`. Records of other harnesses need
only ``query_id``, ``gold_in_context`` and ``pass``; every other field is optional and the
comparison leaves out what no record has.

A release's labels must come from one labeller manifest: labels from different manifests measure
different things, so mixing them is refused (`MixedManifestError`) unless the caller forces it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson

from ragtrace_store import (
    GENERATION_VERDICTS,
    OUTCOMES,
    LabelError,
    LabelRecord,
    json_line_values,
    read_label_columns,
)

__all__ = [
    "INCOMPLETE",
    "CompareError",
    "LabelSet",
    "MixedManifestError",
    "TraceLabel",
    "check_manifests",
    "label_set",
    "load_jsonl",
    "load_pair",
    "load_release",
    "parse_record",
    "release_manifests",
    "releases_manifests",
]


#: the outcome of a trace that lost attributes or a stage: its own outcome, never a failure mode. A
#: record says so with ``"incomplete": true`` (the audit keeps such a key beside the contract's).
INCOMPLETE = "incomplete"


class CompareError(Exception):
    """Base of every `ragtrace compare` error; the message says what to fix."""


class MixedManifestError(CompareError):
    """Labels of more than one labeller manifest would be compared."""


@dataclass(frozen=True)
class TraceLabel:
    """One labelled query of one release. ``None`` means unknown (never False or 0)."""

    query_id: str
    passed: bool
    gold_in_context: bool | None
    trace_id: str = ""
    release: str = ""
    service: str = ""
    manifest_id: str = ""
    gold_in_pool: bool | None = None
    ranking_ok: bool | None = None
    #: generation verdict: entailed | neutral | contradicted | abstained (None when not labelled)
    verdict: str | None = None
    refusal_justified: bool | None = None
    #: end-to-end quality in [0, 1], None when the source has no score
    score: float | None = None
    #: the stage metrics of the record's ``metrics`` dict (booleans as 0/1; None = undefined)
    metrics: Mapping[str, float | None] = field(default_factory=dict)
    #: the primary failure mode (`ragtrace_store.FAILURE_MODES`), ``"incomplete"`` for a trace the
    #: audit marked incomplete, None when the source gives none (a harness record)
    failure_mode: str | None = None

    @classmethod
    def from_record(cls, rec: LabelRecord) -> TraceLabel:
        """The comparison's view of a label record of the contract."""
        gen = rec.generation
        return cls(
            query_id=rec.query_id, passed=rec.passed, gold_in_context=rec.gold_in_context, trace_id=rec.trace_id,
            release=rec.release, service=rec.service, manifest_id=rec.manifest_id, gold_in_pool=rec.gold_in_pool,
            ranking_ok=rec.ranking.ok, verdict=gen.verdict.value if gen is not None else None,
            refusal_justified=gen.refusal_justified if gen is not None else None, score=rec.score,
            metrics={k: None if v is None else float(v) for k, v in rec.metrics.items()},
            failure_mode=INCOMPLETE if rec.extra.get(INCOMPLETE) is True else rec.failure_mode.value,
        )


@dataclass(frozen=True)
class LabelSet:
    """The labels of one side of a comparison, one per query id (duplicates collapsed, counted)."""

    name: str
    source: str  # "file" | "store"
    labels: tuple[TraceLabel, ...]
    manifest_ids: tuple[str, ...] = ()
    #: records dropped because a later record had the same query id (the later one is kept)
    n_duplicates: int = 0
    #: records that had no query id and so cannot be paired
    no_query_id: tuple[str, ...] = ()
    #: query ids of this side whose labels were not read because the other side has none of them
    #: (`load_pair`: the pairing done by the engine); `labels` then holds the paired ones only
    unpaired: tuple[str, ...] = ()

    @property
    def n_queries(self) -> int:
        """The distinct query ids of this side, read or not."""
        return len(self.labels) + len(self.unpaired)


def _bool(value: Any, field_name: str, where: str, *, nullable: bool) -> bool | None:
    if value is None:
        if nullable:
            return None
        raise CompareError(f"{where}: {field_name!r} is required and must be true or false, not null")
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise CompareError(f"{where}: {field_name!r} must be true/false{' or null' if nullable else ''}, "
                       f"got {value!r}")


def _float(value: Any, field_name: str, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    raise CompareError(f"{where}: {field_name!r} must be a finite number, true/false or null, got {value!r}")


def _section(rec: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = rec.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise CompareError(f"{where}: {key!r} must be an object, got {type(value).__name__}")
    return value


def parse_record(rec: Mapping[str, Any], where: str = "record") -> TraceLabel:
    """Validate one per-trace record; ``where`` (e.g. ``file.jsonl:12``) prefixes every error.

    A record with a ``failure_mode`` is a label record of the contract and must be whole (see
    `ragtrace_store.LabelRecord`); any other is a harness record (module docstring).
    """
    if not isinstance(rec, Mapping):
        raise CompareError(f"{where}: expected a JSON object, got {type(rec).__name__}")
    if "failure_mode" in rec:
        try:
            return TraceLabel.from_record(LabelRecord.from_json(rec, where))
        except LabelError as exc:
            raise CompareError(str(exc)) from exc
    qid = rec.get("query_id")
    if qid is not None and not isinstance(qid, str | int):
        raise CompareError(f"{where}: 'query_id' must be a string, got {qid!r}")
    if "pass" not in rec:
        raise CompareError(f"{where}: missing 'pass' (true/false end-to-end verdict); every record needs "
                           "query_id, gold_in_context and pass")
    retrieval = _section(rec, "retrieval", where)
    ranking = _section(rec, "ranking", where)
    generation = _section(rec, "generation", where)
    if "gold_in_context" in rec:
        gic_raw = rec["gold_in_context"]
    elif "gold_in_context" in retrieval:
        gic_raw = retrieval["gold_in_context"]
    else:
        raise CompareError(f"{where}: missing 'gold_in_context' (true, false, or null when relevance is "
                           "unknown)")
    pool_raw = rec.get("gold_in_pool", retrieval.get("gold_in_pool"))
    verdict = generation.get("verdict")
    if verdict is not None and verdict not in GENERATION_VERDICTS:
        raise CompareError(f"{where}: generation.verdict must be one of {sorted(GENERATION_VERDICTS)}, "
                           f"got {verdict!r}")
    score = _float(rec.get("score"), "score", where)
    if score is not None and not 0.0 <= score <= 1.0:
        raise CompareError(f"{where}: 'score' is end-to-end quality in [0, 1], got {score}")
    metrics_raw = rec.get("metrics") or {}
    if not isinstance(metrics_raw, Mapping):
        raise CompareError(f"{where}: 'metrics' must be an object of metric name → number/null")
    metrics = {str(k): _float(v, f"metrics.{k}", where) for k, v in metrics_raw.items()}
    return TraceLabel(
        query_id="" if qid is None else str(qid),
        passed=bool(_bool(rec["pass"], "pass", where, nullable=False)),
        gold_in_context=_bool(gic_raw, "gold_in_context", where, nullable=True),
        trace_id=str(rec.get("trace_id") or ""),
        release=str(rec.get("release") or ""),
        service=str(rec.get("service") or ""),
        manifest_id=str(rec.get("manifest_id") or ""),
        gold_in_pool=_bool(pool_raw, "gold_in_pool", where, nullable=True),
        ranking_ok=_bool(ranking.get("ok"), "ranking.ok", where, nullable=True),
        verdict=verdict,
        refusal_justified=_bool(generation.get("refusal_justified"), "generation.refusal_justified", where,
                                nullable=True),
        score=score,
        metrics=metrics,
    )


def label_set(name: str, source: str, labels: Iterable[TraceLabel]) -> LabelSet:
    """Collapse to one label per query id (the last one wins) and set aside records without an id."""
    by_query: dict[str, TraceLabel] = {}
    no_id: list[str] = []
    dups = 0
    manifests: set[str] = set()
    for lab in labels:
        if lab.manifest_id:
            manifests.add(lab.manifest_id)
        if not lab.query_id:
            no_id.append(lab.trace_id)
            continue
        if lab.query_id in by_query:
            dups += 1
            del by_query[lab.query_id]  # keep insertion order = order of the kept record
        by_query[lab.query_id] = lab
    return LabelSet(name=name, source=source, labels=tuple(by_query.values()),
                    manifest_ids=tuple(sorted(manifests)), n_duplicates=dups, no_query_id=tuple(no_id))


def load_jsonl(path: str | Path, name: str | None = None) -> LabelSet:
    """Per-trace records from a JSON Lines file (blank lines allowed; errors start ``PATH:N:``)."""
    p = Path(path)
    try:
        labels = [parse_record(rec, where) for where, rec in json_line_values(p, CompareError, _LINE_SHAPE)]
    except OSError as exc:
        raise CompareError(f"cannot read {p}: {exc.strerror or exc}") from exc
    if name is None:
        # Name the side by its release when the file holds one, so reports read "v1 (labels-v1.jsonl)".
        releases = {lab.release for lab in labels if lab.release}
        name = f"{releases.pop()} ({p.name})" if len(releases) == 1 else str(p)
    return label_set(name, "file", labels)


#: what each line of a compared file must be (the end of a JSON Lines error)
_LINE_SHAPE = "expected one record per line (a JSON object with query_id, gold_in_context and pass at least)"


def check_manifests(baseline: LabelSet, candidate: LabelSet, *, force: bool = False) -> list[str]:
    """Refuse labels of different manifests unless ``force``; returns the warnings when forced."""
    ids = sorted(set(baseline.manifest_ids) | set(candidate.manifest_ids))
    if len(ids) <= 1:
        return []
    detail = (f"baseline {baseline.name!r} has {list(baseline.manifest_ids) or 'no manifest'}, "
              f"candidate {candidate.name!r} has {list(candidate.manifest_ids) or 'no manifest'}")
    if not force:
        raise MixedManifestError(
            f"labels from {len(ids)} labeller manifests ({detail}). Labels of different labellers, "
            "thresholds or code measure different things: relabel both releases with one manifest "
            "(`ragtrace audit`), choose one with --manifest ID, or pass --force to compare anyway.")
    return [f"comparing labels of different manifests because --force was given: {detail}"]


#: what a comparison reads of a stored label (`read_label_columns`): the table's columns, and of the
#: record in ``detail`` only the parts it uses, extracted by the engine. Validating every record whole
#: (`LabelRecord.from_json`) cost four times the rows' own read: the rows were validated when written.
_STORE_COLUMNS = ("manifest_id", "trace_id", "query_id", "release", "service", "failure_mode", "gold_in_pool",
                  "gold_in_context", "ranking_ok", "generation", "passed", "score",
                  "JSONExtractRaw(detail, 'generation', 'refusal_justified')", "JSONExtractRaw(detail, 'metrics')",
                  "JSONExtractRaw(detail, 'incomplete')", "detail = '' OR isValidJSON(detail)")
_OUTCOMES = frozenset(OUTCOMES)
_VERDICTS = frozenset(GENERATION_VERDICTS)


def load_release(store: Any, release: str, *, tenant: str = "default", service: str | None = None,
                 manifest_id: str | None = None) -> list[LabelSet]:
    """The labels of one release in the store, one `LabelSet` per manifest found (newest first).

    Reads the ``labels`` table through `ragtrace_store.read_label_columns` (what
    `TraceLabel.from_record` takes from each record, the newest version of each row). The caller
    chooses the manifest (see `ragtrace_cli.commands.compare`); an empty list means nothing is labelled.
    """
    try:
        rows = read_label_columns(store, _STORE_COLUMNS, tenant=tenant, release=release, service=service,
                                  manifest_id=manifest_id)
    except LabelError as exc:
        raise CompareError(str(exc)) from exc
    grouped: dict[str, list[TraceLabel]] = {}  # newest manifest first, as read_labels orders them
    for row in rows:
        lab = _stored_label(tenant, row)
        grouped.setdefault(lab.manifest_id, []).append(lab)
    return [label_set(release, "store", labs) for labs in grouped.values()]


def release_manifests(store: Any, release: str, *, tenant: str = "default", service: str | None = None,
                      manifest_id: str | None = None) -> list[str]:
    """The labeller manifests with labels of ``release`` (newest first, as `load_release` orders its
    label sets), read without the labels."""
    return releases_manifests(store, [release], tenant=tenant, service=service, manifest_id=manifest_id)[release]


def releases_manifests(store: Any, releases: Sequence[str], *, tenant: str = "default", service: str | None = None,
                       manifest_id: str | None = None) -> dict[str, list[str]]:
    """`release_manifests` of each of ``releases``, in one read."""
    conds = ["tenant = {tenant:String}", "release IN {r_releases:Array(String)}"]
    params: dict[str, Any] = {"tenant": tenant, "r_releases": list(releases)}
    if manifest_id is not None:
        conds.append("manifest_id = {r_manifest:String}")
        params["r_manifest"] = manifest_id
    if service is not None:
        conds.append("service = {service:String}")
        params["service"] = service
    # the newest versions of the manifests with a row of these releases: a condition on the key's
    # first column, so the engine reads only those manifests' rows (GLOBAL: found once over every
    # shard of a cluster, where a manifest's labels are on all of them)
    keys = ["tenant = {tenant:String}", f"manifest_id GLOBAL IN (SELECT manifest_id FROM {store.table('labels')} "
                                        f"WHERE {' AND '.join(conds)})"]
    out: dict[str, list[str]] = {r: [] for r in releases}
    for rel, manifest, _newest in store.query_rows(
            "SELECT release, manifest_id, max(labelled_at) AS newest FROM "
            f"({_newest_final(store, keys, conds, 'release, manifest_id, labelled_at')}) "
            f"GROUP BY release, manifest_id ORDER BY newest DESC, manifest_id{_AFTER_FINAL}", params):
        out[str(rel)].append(str(manifest))
    return out


def _newest_final(store: Any, keys: Sequence[str], values: Sequence[str], columns: str) -> str:
    """What `newest_labels_sql` returns for ``keys`` that name whole manifests, through ``FINAL``
    over only the key ranges they select: the engine reads those manifests' rows in key order and
    keeps each (manifest, trace)'s newest version as its own merges do, merging only where parts
    overlap: at 10 M traces, 0.6 of the time of sorting each key's versions with ``LIMIT 1 BY`` in
    one merged part and 0.4 of it in 50 overlapping parts (docs/benchmarks.md). ``values`` hold for
    the newest version only: a condition beside ``FINAL`` is applied after it unless the engine
    moves it before (`_AFTER_FINAL`, which the query must end with, rules that out, and versions in
    two monthly partitions are collapsed too)."""
    return f"SELECT {columns} FROM {store.table('labels')} FINAL WHERE {' AND '.join([*keys, *values])}"


#: ClickHouse's defaults, written out so that a server's profile cannot change what FINAL returns: a
#: condition beside FINAL applies after it, and versions are collapsed across partitions (a label's
#: trace time, the partition key, moves when its trace's root is decided again)
_AFTER_FINAL = " SETTINGS optimize_move_to_prewhere_if_final = 0, do_not_merge_across_partitions_select_final = 0"


#: what a comparison reads of a paired label's ``detail``, parsed once by the engine (JSONExtractRaw
#: per part parses the whole record once per part): the metrics object (raw JSON) and the two flags
_DETAIL = ("JSONExtract(detail, 'Tuple(metrics String, incomplete String, "
           "generation Tuple(refusal_justified String))')")
#: a paired label's columns, as `_stored_label` reads them after the parts of ``detail``
_PAIR_COLUMNS = ("manifest_id", "trace_id", "query_id", "release", "service", "failure_mode", "gold_in_pool",
                 "gold_in_context", "ranking_ok", "generation", "passed", "score")
#: the same columns' values in a row that stands for the labels not read (the type of each, for UNION ALL)
_NOT_READ = "'', '', '', '', '', '', NULL, NULL, NULL, '', false, NULL"


def load_pair(store: Any, baseline: tuple[str, str], candidate: tuple[str, str], *, tenant: str = "default",
              service: str | None = None) -> tuple[LabelSet, LabelSet]:
    """Two sides of a comparison, each a (release, manifest id), paired by the engine: only the labels
    whose query id the other side also has are read (`LabelSet.unpaired` names the others), so a
    comparison holds what its paired queries cost, not every label of both releases. The same
    `pair` and comparison as `load_release` on each side (tests/compare/test_compare_store.py)."""
    if baseline == candidate:  # a release against itself: every query pairs, one read
        (ls,) = load_release(store, baseline[0], tenant=tenant, service=service, manifest_id=baseline[1])
        return ls, ls
    params: dict[str, Any] = {"tenant": tenant, "a_release": baseline[0], "a_manifest": baseline[1],
                              "b_release": candidate[0], "b_manifest": candidate[1]}
    a, b = (f"(release = {{{k}_release:String}} AND manifest_id = {{{k}_manifest:String}})" for k in "ab")
    conds = ["tenant = {tenant:String}", f"({a} OR {b})"]
    if service is not None:
        conds.append("service = {service:String}")
        params["service"] = service
    keys = ["tenant = {tenant:String}", "manifest_id IN ({a_manifest:String}, {b_manifest:String})"]
    side = f"if({a}, 0, 1) AS side"
    # The query ids both sides have, found from the key columns alone; then two parts in one read: the
    # paired labels with every column (the detail of these alone parsed), and a row per side for what
    # is not read: its query ids (the other side lacks them), its duplicates (as `label_set` counts
    # them), the trace ids of records without a query id (in read order). Reading every column of
    # every label to find the pairs (a window over the query id) took twice as long. The first part
    # names every column: `SELECT *` over the union keeps one column of each name.
    keyed = _newest_final(store, keys, conds, f"{side}, query_id, trace_id, trace_time")
    # both sides have a query id when its sides (0 and 1) differ: min and max, half the cost of uniqExact.
    # GLOBAL: on a cluster labels are sharded by trace id, so a query's two sides may be on two shards;
    # the pairs are found once over every shard, by the node that asks (on one node it is plain IN)
    paired = f"SELECT query_id FROM ({keyed}) WHERE query_id != '' GROUP BY query_id HAVING min(side) != max(side)"
    rows = store.query_rows(
        f"SELECT * FROM (SELECT side, true AS p, {', '.join(_PAIR_COLUMNS)}, d.generation.refusal_justified, "
        # a record the engine cannot parse yields no metrics object (every stored record has one), so
        # the validity check parses again only those
        "d.metrics, d.incomplete, detail = '' OR d.metrics != '' OR isValidJSON(detail), '' AS unpaired, "
        f"toUInt64(0) AS dups, '' AS no_id, trace_time FROM (SELECT *, {_DETAIL} AS d FROM ("
        f"{_newest_final(store, keys, conds, side + ', detail, trace_time, ' + ', '.join(_PAIR_COLUMNS))}) "
        f"WHERE query_id GLOBAL IN ({paired})) UNION ALL SELECT side, false, {_NOT_READ}, '', '', '', true, "
        "toJSONString(arraySort(groupUniqArrayIf(query_id, query_id != ''))), "
        "toUInt64(countIf(query_id != '') - uniqExactIf(query_id, query_id != '')), "
        "toJSONString(arrayMap(x -> x.2, arraySort(groupArrayIf((trace_time, trace_id), query_id = '')))), "
        f"toDateTime64(0, 3, 'UTC') FROM ({keyed}) WHERE query_id GLOBAL NOT IN ({paired}) GROUP BY side) "
        f"ORDER BY side, p, trace_time, trace_id{_AFTER_FINAL}", params)
    out = []
    for side_no, (release, manifest) in enumerate((baseline, candidate)):
        mine = [r for r in rows if r[0] == side_no]
        rest = [r for r in mine if not r[1]]
        ls = label_set(release, "store", (_stored_label(tenant, r[2:18]) for r in mine if r[1]))
        # the arrays as JSON text: a few of them, where an array column costs Python a list for every row
        unpaired, dups, no_id = ((orjson.loads(rest[0][18]), rest[0][19], orjson.loads(rest[0][20])) if rest
                                 else ([], 0, []))
        out.append(replace(ls, manifest_ids=(manifest,), n_duplicates=ls.n_duplicates + int(dups),
                           no_query_id=tuple(no_id), unpaired=tuple(unpaired)))
    return out[0], out[1]


def _stored_label(tenant: str, row: tuple[Any, ...]) -> TraceLabel:
    """One row of `_STORE_COLUMNS` as `TraceLabel.from_record` reads the stored record."""
    (manifest, trace_id, query_id, rel, service, mode, in_pool, in_ctx, ranking_ok, verdict, passed, score,
     refusal, metrics_json, incomplete, valid) = row
    if not valid:
        raise CompareError(f"{_row(tenant, row)}: the detail column is not JSON; re-run `ragtrace audit --no-resume`")
    if mode not in _OUTCOMES or (verdict and verdict not in _VERDICTS):
        raise CompareError(f"{_row(tenant, row)}: failure_mode {mode!r} / generation {verdict!r} is not a label of "
                           "the contract; re-run `ragtrace audit --no-resume`")
    try:
        raw_metrics = orjson.loads(metrics_json) if metrics_json else {}
        # the raw JSON of a boolean or null (most rows) without a parser call
        justified = _JSON_BOOL[refusal] if refusal in _JSON_BOOL else orjson.loads(refusal)
    except orjson.JSONDecodeError:  # the engine extracted these from valid JSON: not expected
        raise CompareError(f"{_row(tenant, row)}: unreadable metrics in detail; re-run `ragtrace audit "
                           "--no-resume`") from None
    if not isinstance(raw_metrics, dict) or not isinstance(justified, bool | None):
        raise CompareError(f"{_row(tenant, row)}: 'metrics' must be an object and 'generation.refusal_justified' "
                           "true, false or null; re-run `ragtrace audit --no-resume`")
    # JSON numbers are finite: a float, an int, a boolean or null (every value here) needs no check;
    # JSON keys are strings. Converted in place: most values are floats already
    for k, v in raw_metrics.items():
        if v is not None and type(v) is not float:
            raw_metrics[k] = float(v) if type(v) in _AS_FLOAT else _float(v, f"metrics.{k}", _row(tenant, row))
    # every field, checked above, set at once (`_checked_label`); the driver gives str, bool and float
    # (or None) for these columns already, so they are not converted again
    return _checked_label({
        "query_id": query_id, "passed": passed, "gold_in_context": in_ctx, "trace_id": trace_id, "release": rel,
        "service": service, "manifest_id": manifest, "gold_in_pool": in_pool, "ranking_ok": ranking_ok,
        "verdict": verdict or None, "refusal_justified": justified, "score": score, "metrics": raw_metrics,
        "failure_mode": INCOMPLETE if incomplete == "true" else mode})


_JSON_BOOL: dict[str, bool | None] = {"true": True, "false": False, "null": None, "": None}
_AS_FLOAT = frozenset({int, bool})


def _row(tenant: str, row: tuple[Any, ...]) -> str:
    """Which stored row an error is about (built only for an error: most of a row's cost otherwise)."""
    return f"labels row tenant={tenant} manifest_id={row[0]} trace_id={row[1]}"


def _checked_label(values: dict[str, Any]) -> TraceLabel:
    """A `TraceLabel` of values already checked, with its attributes set at once. A frozen
    dataclass's ``__init__`` sets each field through ``object.__setattr__``: 5.7 µs a label, most of
    what a compare's read of 42,000 stored labels cost in Python, against 0.2 µs here. The object is
    the same one ``__init__`` makes (equal, same hash and repr, still frozen); ``values`` must name
    every field."""
    lab = object.__new__(TraceLabel)
    object.__setattr__(lab, "__dict__", values)  # the dict itself, not a copy into a new one
    return lab
