"""A release's labels as a comparison reads them: the manifests that labelled it, its labels under
one manifest, and two releases' labels paired by query id in the engine.

Every read takes each (manifest, trace)'s newest label as `ragtrace_store.labels.newest_labels_sql`
decides it (the store's one rule for "the newest label"), and answers with `LabelSummary` objects
built from the table's columns and the parts of ``detail`` a comparison uses, extracted by the
engine: validating every stored record whole (`LabelRecord.from_json`) cost four times the rows' own
read, and the rows were validated when written. A stored row that is not a record of the contract
raises `LabelError` naming the row and what to do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from ragtrace_store.label_summary import INCOMPLETE, LabelSummary, checked_summary
from ragtrace_store.labels import GENERATION_VERDICTS, OUTCOMES, LabelError, _read_label_columns, newest_labels_sql

if TYPE_CHECKING:
    from ragtrace_store.client import Store

__all__ = ["PairedRelease", "paired_labels", "release_labels", "releases_manifests"]


@dataclass(frozen=True)
class PairedRelease:
    """One side of a comparison read by `paired_labels`: the labels whose query id the other side
    also has (in trace-time order), and what was not read."""

    release: str
    manifest_id: str
    #: the paired labels, every record of a paired query id (duplicates too), oldest trace first
    labels: tuple[LabelSummary, ...]
    #: this side's query ids the other side lacks (sorted); their labels were not read
    unpaired: tuple[str, ...]
    #: records of unpaired query ids beyond the first of each (duplicates among what was not read)
    unpaired_duplicates: int
    #: trace ids of the records without a query id (oldest trace first): they cannot be paired
    no_query_id: tuple[str, ...]


def releases_manifests(store: Store, releases: Sequence[str], *, tenant: str, service: str | None = None,
                       manifest_id: str | None = None) -> dict[str, list[str]]:
    """The labeller manifests with labels of each of ``releases``, newest (by the manifest's newest
    label of the release) first, then by id; a release with none maps to []. One read."""
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
    newest = newest_labels_sql(store, keys, conds, columns=("tenant", "release", "service", "labelled_at"))
    out: dict[str, list[str]] = {r: [] for r in releases}
    for rel, manifest, _newest in store.query_rows(
            f"SELECT release, manifest_id, max(labelled_at) AS newest FROM ({newest}) "
            "GROUP BY release, manifest_id ORDER BY newest DESC, manifest_id", params):
        out[str(rel)].append(str(manifest))
    return out


#: what a comparison reads of a stored label: the table's columns, and of the record in ``detail`` only
#: the parts it uses, extracted by the engine
_RELEASE_COLUMNS = ("manifest_id", "trace_id", "query_id", "release", "service", "failure_mode", "gold_in_pool",
                    "gold_in_context", "ranking_ok", "generation", "passed", "score",
                    "JSONExtractRaw(detail, 'generation', 'refusal_justified')", "JSONExtractRaw(detail, 'metrics')",
                    "JSONExtractRaw(detail, 'incomplete')", "detail = '' OR isValidJSON(detail)")


def release_labels(store: Store, release: str, *, tenant: str, service: str | None = None,
                   manifest_id: str | None = None) -> list[tuple[str, list[LabelSummary]]]:
    """The labels of one release, ``(manifest id, labels)`` per manifest that has some, the most
    recently labelling manifest first; each manifest's labels by trace time, then trace id."""
    rows = _read_label_columns(store, _RELEASE_COLUMNS, tenant=tenant, release=release, service=service,
                               manifest_id=manifest_id)
    grouped: dict[str, list[LabelSummary]] = {}  # newest manifest first, as the rows come
    for row in rows:
        lab = _stored_summary(tenant, row)
        grouped.setdefault(lab.manifest_id, []).append(lab)
    return list(grouped.items())


#: what a comparison reads of a paired label's ``detail``, parsed once by the engine (JSONExtractRaw
#: per part parses the whole record once per part): the metrics object (raw JSON) and the two flags
_DETAIL = ("JSONExtract(detail, 'Tuple(metrics String, incomplete String, "
           "generation Tuple(refusal_justified String))')")
#: a paired label's columns, as `_stored_summary` reads them before the parts of ``detail``
_PAIR_COLUMNS = ("manifest_id", "trace_id", "query_id", "release", "service", "failure_mode", "gold_in_pool",
                 "gold_in_context", "ranking_ok", "generation", "passed", "score")
#: the same columns' values in a row that stands for the labels not read (the type of each, for UNION ALL)
_NOT_READ = "'', '', '', '', '', '', NULL, NULL, NULL, '', false, NULL"


def paired_labels(store: Store, baseline: tuple[str, str], candidate: tuple[str, str], *, tenant: str,
                  service: str | None = None) -> tuple[PairedRelease, PairedRelease]:
    """Two sides of a comparison, each a (release, manifest id), paired by the engine: only the labels
    whose query id the other side also has are read (`PairedRelease.unpaired` names the others), so a
    comparison holds what its paired queries cost, not every label of both releases. Two different
    sides (a release against itself: `release_labels`)."""
    if baseline == candidate:
        raise ValueError("paired_labels: the two sides are the same (release, manifest); read it once with "
                         "release_labels")
    params: dict[str, Any] = {"tenant": tenant, "a_release": baseline[0], "a_manifest": baseline[1],
                              "b_release": candidate[0], "b_manifest": candidate[1]}
    a, b = (f"(release = {{{k}_release:String}} AND manifest_id = {{{k}_manifest:String}})" for k in "ab")
    conds = [f"({a} OR {b})"]
    read = ["tenant", "release", "service", "query_id", "trace_time"]
    if service is not None:
        conds.append("service = {service:String}")
        params["service"] = service
    keys = ["tenant = {tenant:String}", "manifest_id IN ({a_manifest:String}, {b_manifest:String})"]
    side = f"if({a}, 0, 1) AS side"
    # The query ids both sides have, found from the key columns alone; then two parts in one read: the
    # paired labels with every column (the detail of these alone parsed), and a row per side for what
    # is not read: its query ids (the other side lacks them), its duplicates (as a label set counts
    # them), the trace ids of records without a query id (in read order). Reading every column of
    # every label to find the pairs (a window over the query id) took twice as long. The first part
    # names every column: `SELECT *` over the union keeps one column of each name.
    newest_keys = newest_labels_sql(store, keys, conds, columns=read)
    keyed = f"SELECT {side}, query_id, trace_id, trace_time FROM ({newest_keys})"
    # both sides have a query id when its sides (0 and 1) differ: min and max, half the cost of uniqExact.
    # GLOBAL: on a cluster labels are sharded by trace id, so a query's two sides may be on two shards;
    # the pairs are found once over every shard, by the node that asks (on one node it is plain IN)
    pairs = f"SELECT query_id FROM ({keyed}) WHERE query_id != '' GROUP BY query_id HAVING min(side) != max(side)"
    full = newest_labels_sql(store, keys, conds, columns=(*_PAIR_COLUMNS, "tenant", "trace_time", "detail"))
    rows = store.query_rows(
        f"SELECT * FROM (SELECT side, true AS p, {', '.join(_PAIR_COLUMNS)}, d.generation.refusal_justified, "
        # a record the engine cannot parse yields no metrics object (every stored record has one), so
        # the validity check parses again only those
        "d.metrics, d.incomplete, detail = '' OR d.metrics != '' OR isValidJSON(detail), '' AS unpaired, "
        f"toUInt64(0) AS dups, '' AS no_id, trace_time FROM (SELECT *, {side}, {_DETAIL} AS d FROM ({full}) "
        f"WHERE query_id GLOBAL IN ({pairs})) UNION ALL SELECT side, false, {_NOT_READ}, '', '', '', true, "
        "toJSONString(arraySort(groupUniqArrayIf(query_id, query_id != ''))), "
        "toUInt64(countIf(query_id != '') - uniqExactIf(query_id, query_id != '')), "
        "toJSONString(arrayMap(x -> x.2, arraySort(groupArrayIf((trace_time, trace_id), query_id = '')))), "
        f"toDateTime64(0, 3, 'UTC') FROM ({keyed}) WHERE query_id GLOBAL NOT IN ({pairs}) GROUP BY side) "
        "ORDER BY side, p, trace_time, trace_id", params)
    out = []
    for side_no, (release, manifest) in enumerate((baseline, candidate)):
        mine = [r for r in rows if r[0] == side_no]
        rest = [r for r in mine if not r[1]]
        # the arrays as JSON text: a few of them, where an array column costs Python a list for every row
        unpaired, dups, no_id = ((orjson.loads(rest[0][18]), rest[0][19], orjson.loads(rest[0][20])) if rest
                                 else ([], 0, []))
        out.append(PairedRelease(release, manifest, tuple(_stored_summary(tenant, r[2:18]) for r in mine if r[1]),
                                 tuple(unpaired), int(dups), tuple(no_id)))
    return out[0], out[1]


_OUTCOMES = frozenset(OUTCOMES)
_VERDICTS = frozenset(GENERATION_VERDICTS)
_JSON_BOOL: dict[str, bool | None] = {"true": True, "false": False, "null": None, "": None}
_AS_FLOAT = frozenset({int, bool})


def _stored_summary(tenant: str, row: tuple[Any, ...]) -> LabelSummary:
    """One row of `_RELEASE_COLUMNS` (or of a paired read: the same values) as
    `LabelSummary.from_record` reads the stored record."""
    (manifest, trace_id, query_id, rel, service, mode, in_pool, in_ctx, ranking_ok, verdict, passed, score,
     refusal, metrics_json, incomplete, valid) = row
    if not valid:
        raise LabelError(f"{_row(tenant, row)}: the detail column is not JSON; re-run `ragtrace audit --no-resume`")
    if mode not in _OUTCOMES or (verdict and verdict not in _VERDICTS):
        raise LabelError(f"{_row(tenant, row)}: failure_mode {mode!r} / generation {verdict!r} is not a label of "
                         "the contract; re-run `ragtrace audit --no-resume`")
    try:
        raw_metrics = orjson.loads(metrics_json) if metrics_json else {}
        # the raw JSON of a boolean or null (most rows) without a parser call
        justified = _JSON_BOOL[refusal] if refusal in _JSON_BOOL else orjson.loads(refusal)
    except orjson.JSONDecodeError:  # the engine extracted these from valid JSON: not expected
        raise LabelError(f"{_row(tenant, row)}: unreadable metrics in detail; re-run `ragtrace audit "
                         "--no-resume`") from None
    if not isinstance(raw_metrics, dict) or not isinstance(justified, bool | None):
        raise LabelError(f"{_row(tenant, row)}: 'metrics' must be an object and 'generation.refusal_justified' "
                         "true, false or null; re-run `ragtrace audit --no-resume`")
    # JSON numbers are finite: a float, an int, a boolean or null (every value here) needs no check;
    # JSON keys are strings. Converted in place: most values are floats already
    for k, v in raw_metrics.items():
        if v is not None and type(v) is not float:
            if type(v) not in _AS_FLOAT:
                raise LabelError(f"{_row(tenant, row)}: 'metrics.{k}' must be a finite number, true/false or "
                                 f"null, got {v!r}; re-run `ragtrace audit --no-resume`")
            raw_metrics[k] = float(v)
    # every field, checked above, set at once (`checked_summary`); the driver gives str, bool and float
    # (or None) for these columns already, so they are not converted again
    return checked_summary({
        "query_id": query_id, "passed": passed, "gold_in_context": in_ctx, "trace_id": trace_id, "release": rel,
        "service": service, "manifest_id": manifest, "gold_in_pool": in_pool, "ranking_ok": ranking_ok,
        "verdict": verdict or None, "refusal_justified": justified, "score": score, "metrics": raw_metrics,
        "failure_mode": INCOMPLETE if incomplete == "true" else mode})


def _row(tenant: str, row: tuple[Any, ...]) -> str:
    """Which stored row an error is about (built only for an error: most of a row's cost otherwise)."""
    return f"labels row tenant={tenant} manifest_id={row[0]} trace_id={row[1]}"
