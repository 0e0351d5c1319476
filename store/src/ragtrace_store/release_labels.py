"""A release's labels as a comparison reads them: the manifests that labelled it, its labels under
one manifest, and two releases' labels paired by query id in the engine.

Every read takes each (manifest, trace)'s newest label as `ragtrace_store.label_table.newest_labels_sql`
decides it (the store's one rule for "the newest label"), and answers with `LabelSummary` objects
built from the table's columns and the parts of ``detail`` a comparison uses, extracted by the
engine: validating every stored record whole (`LabelRecord.from_json`) cost four times the rows' own
read, and the rows were validated when written. What is read follows the summary's fields
(`ragtrace_store.label_summary.reads`, a path in the record): for each, the column that copies the
value there (`ragtrace_store.label_table.column_copying`), else that part of ``detail``. A stored row
that is not a record of the contract raises `LabelError` naming the row and what to do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import orjson

from ragtrace_store.label_fields import LabelError
from ragtrace_store.label_summary import INCOMPLETE, SUMMARY_PATHS, LabelSummary, checked_summary
from ragtrace_store.label_table import RECORD_COLUMNS, column_copying, newest_label_rows, newest_labels_sql
from ragtrace_store.labels import GENERATION_VERDICTS, OUTCOMES

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


#: each field of the summary (in field order), the path of the record it reads, and the column that
#: copies the value there (None: the engine extracts it from ``detail`` as raw JSON)
_SOURCES: Final = tuple((name, path, column_copying(path)) for name, path in SUMMARY_PATHS.items())
_NAMES: Final = tuple(name for name, _, _ in _SOURCES)
#: the parts of ``detail`` read: the summary's fields that no column copies (`_stored_summary` parses
#: them), then the key that said "incomplete" before that outcome existed
_DETAIL_PATHS: Final = (*(path for _, path, column in _SOURCES if column is None), (INCOMPLETE,))
#: a column's value where the record has none (``generation`` is '' without a generation label),
#: which the summary holds as None
_EMPTY: Final = tuple((name, c.empty) for name, _, column in _SOURCES for c in RECORD_COLUMNS
                      if c.name == column and c.empty is not None)


def _dict_of(names: tuple[str, ...]) -> Callable[[tuple[Any, ...]], dict[str, Any]]:
    """``row -> {names[0]: row[0], names[1]: row[1], ...}`` (the row's first values), a dict display
    compiled once: 0.37 µs a row for the summary's 14 fields against 0.82 for ``dict(zip(names, row))``,
    on the path that builds a summary per stored label (the names are string literals in the source)."""
    source = "def dict_of(row):\n    return {" + ", ".join(f"{n!r}: row[{i}]" for i, n in enumerate(names)) + "}\n"
    ns: dict[str, Any] = {}
    exec(compile(source, "<summary fields of a labels row>", "exec"), ns)
    dict_of: Callable[[tuple[Any, ...]], dict[str, Any]] = ns["dict_of"]
    return dict_of


#: a row's first values as the summary's fields
_SUMMARY_OF: Final = _dict_of(_NAMES)


def _raw(path: tuple[str, ...]) -> str:
    # the path's keys are the summary's (identifiers written in this package, never input)
    return "JSONExtractRaw(detail, " + ", ".join(f"'{p}'" for p in path) + ")"


#: what a comparison reads of a stored label: a value per summary field, from its column or the part of
#: ``detail`` the engine extracts; the raw ``incomplete`` key; whether ``detail`` is JSON
_RELEASE_COLUMNS: Final = (*(column or _raw(path) for _, path, column in _SOURCES), _raw((INCOMPLETE,)),
                           "detail = '' OR isValidJSON(detail)")


def release_labels(store: Store, release: str, *, tenant: str, service: str | None = None,
                   manifest_id: str | None = None) -> list[tuple[str, list[LabelSummary]]]:
    """The labels of one release, ``(manifest id, labels)`` per manifest that has some, the most
    recently labelling manifest first; each manifest's labels by trace time, then trace id."""
    rows = newest_label_rows(store, _RELEASE_COLUMNS, tenant=tenant, release=release, service=service,
                             manifest_id=manifest_id)
    grouped: dict[str, list[LabelSummary]] = {}  # newest manifest first, as the rows come
    for row in rows:
        lab = _stored_summary(tenant, row)
        grouped.setdefault(lab.manifest_id, []).append(lab)
    return list(grouped.items())


def _tuple_type(paths: tuple[tuple[str, ...], ...]) -> str:
    """The named ``Tuple`` type that ``JSONExtract`` fills with the values at ``paths`` of ``detail``,
    each a String: the raw JSON there, '' when absent."""
    tree: dict[str, Any] = {}
    for path in paths:
        node = tree
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = None

    def render(node: dict[str, Any]) -> str:
        return f"Tuple({', '.join(f'{k} ' + ('String' if v is None else render(v)) for k, v in node.items())})"

    return render(tree)


#: what a comparison reads of a paired label's ``detail``, parsed once by the engine (JSONExtractRaw
#: per part parses the whole record once per part): the parts of `_DETAIL_PATHS`, as raw JSON
_DETAIL: Final = f"JSONExtract(detail, '{_tuple_type(_DETAIL_PATHS)}')"
#: a paired label's columns, read with every column of the paired labels only
_PAIR_COLUMNS: Final = tuple(column for _, _, column in _SOURCES if column)
#: a paired label's values, as `_stored_summary` reads them (the parts of ``detail`` from ``d``, the
#: extracted tuple), before whether ``detail`` is JSON
_PAIR_VALUES: Final = (*(column or f"d.{'.'.join(path)}" for _, path, column in _SOURCES), f"d.{INCOMPLETE}")
#: the same values in the row that stands for a side's labels not read: NULL or '', which UNION ALL
#: joins with each column's type
_NOT_READ: Final = ", ".join("NULL" if column else "''" for _, _, column in _SOURCES) + ", ''"
#: where that row holds what was not read: its unpaired query ids, duplicates, ids without a query id
_UNPAIRED: Final = 2 + len(_PAIR_VALUES) + 1


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
        f"SELECT * FROM (SELECT side, true AS p, {', '.join(_PAIR_VALUES)}, "
        # a record the engine cannot parse yields no metrics object (every stored record has one), so
        # the validity check parses again only those
        "detail = '' OR d.metrics != '' OR isValidJSON(detail), '' AS unpaired, "
        f"toUInt64(0) AS dups, '' AS no_id, trace_time FROM (SELECT *, {side}, {_DETAIL} AS d FROM ({full}) "
        f"WHERE query_id GLOBAL IN ({pairs})) UNION ALL SELECT side, false, {_NOT_READ}, true, "
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
        at = _UNPAIRED
        unpaired, dups, no_id = ((orjson.loads(rest[0][at]), rest[0][at + 1], orjson.loads(rest[0][at + 2]))
                                 if rest else ([], 0, []))
        out.append(PairedRelease(release, manifest, tuple(_stored_summary(tenant, r[2:at]) for r in mine if r[1]),
                                 tuple(unpaired), int(dups), tuple(no_id)))
    return out[0], out[1]


_OUTCOMES = frozenset(OUTCOMES)
_VERDICTS = frozenset(GENERATION_VERDICTS)
_JSON_BOOL: dict[str, bool | None] = {"true": True, "false": False, "null": None, "": None}
_AS_FLOAT = frozenset({int, bool})


def _stored_summary(tenant: str, row: tuple[Any, ...]) -> LabelSummary:
    """One row of `_RELEASE_COLUMNS` (or of a paired read: the same values) as
    `LabelSummary.from_record` reads the stored record. The summary's fields that a column copies come
    as the driver gives them (str, bool, float or None: not converted again); those read from
    ``detail`` (raw JSON) are parsed and checked here, each by name."""
    if not row[-1]:
        raise LabelError(f"{_row(tenant, row)}: the detail column is not JSON; re-run `ragtrace audit --no-resume`")
    summary = _SUMMARY_OF(row)  # the row's first values; then the ``incomplete`` key and the check
    for name, empty in _EMPTY:
        if summary[name] == empty:
            summary[name] = None
    mode, verdict = summary["failure_mode"], summary["verdict"]
    if mode not in _OUTCOMES or (verdict is not None and verdict not in _VERDICTS):
        raise LabelError(f"{_row(tenant, row)}: failure_mode {mode!r} / generation {verdict or ''!r} is not a "
                         "label of the contract; re-run `ragtrace audit --no-resume`")
    metrics_json, refusal = summary["metrics"], summary["refusal_justified"]
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
    summary["metrics"], summary["refusal_justified"] = raw_metrics, justified
    if row[-2] == "true":  # the ``incomplete`` key of records written before the outcome existed
        summary["failure_mode"] = INCOMPLETE
    # every field, checked above, set at once (`checked_summary`)
    return checked_summary(summary)


_AT_MANIFEST, _AT_TRACE = _NAMES.index("manifest_id"), _NAMES.index("trace_id")


def _row(tenant: str, row: tuple[Any, ...]) -> str:
    """Which stored row an error is about (built only for an error: most of a row's cost otherwise)."""
    return f"labels row tenant={tenant} manifest_id={row[_AT_MANIFEST]} trace_id={row[_AT_TRACE]}"
