"""The flat part of a label record that a comparison reads: `LabelSummary`.

A `ragtrace_store.LabelRecord` (the per-trace record of the labels contract, its one parser
`LabelRecord.from_json` and one writer `LabelRecord.to_json`) nests its boundaries, claims and
annotations; a paired comparison of two releases needs a dozen flat values of each record, and reads
tens of thousands of them. `LabelSummary` is those values, made three ways that give the same object:

- from a record: `LabelSummary.from_record` (the one mapping of record fields to summary fields);
- from a JSON object: `LabelSummary.from_json`, which reads a record of the contract through
  `LabelRecord.from_json` and a harness's own record (only ``query_id``, ``gold_in_context`` and
  ``pass`` required) with the contract's own field checks;
- from stored rows: the store's reads for comparisons (`ragtrace_store.release_labels`), which take the
  table's columns and the parts of ``detail`` they need from the engine rather than validating every
  stored record whole (the rows were validated when written); tests/compare/test_compare_store.py shows
  them equal to `LabelSummary.from_record` of the whole records.

Each field names where the record holds its value (`reads`: a path in the record's JSON object):
`from_record` reads it from there, and the store's reads select the column that copies it, or that
part of ``detail``. A field of the summary is that one declaration (and, for harness records, a line
of `from_json`).

``None`` means unknown or undefined, never False or 0.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ragtrace_store.label_fields import enum, fail, flag, metric, number, obj, paths_reader
from ragtrace_store.labels import FailureMode, GenerationVerdict, LabelRecord

__all__ = ["SUMMARY_PATHS", "LabelSummary", "checked_summary", "reads"]

#: the outcome of a trace that lost attributes or a stage: its own outcome, never a failure mode. A
#: record of the contract says so with failure_mode ``incomplete``; records written before that outcome
#: existed say it with ``"incomplete": true`` (a key kept beside the contract's, in `LabelRecord.extra`).
INCOMPLETE = FailureMode.INCOMPLETE.value

_PATH: Final = "ragtrace_store.summary_path"


def reads(*path: str, **field_args: Any) -> Any:
    """A field of `LabelSummary` holding the value at ``path`` of the record's JSON object
    (``field_args``: `dataclasses.field`'s ``default``, ``default_factory``)."""
    return dataclasses.field(metadata={_PATH: path}, **field_args)


@dataclass(frozen=True)
class LabelSummary:
    """One labelled query of one release, as a comparison reads it. ``None`` means unknown."""

    query_id: str = reads("query_id")
    passed: bool = reads("pass")
    gold_in_context: bool | None = reads("gold_in_context")
    trace_id: str = reads("trace_id", default="")
    release: str = reads("release", default="")
    service: str = reads("service", default="")
    manifest_id: str = reads("manifest_id", default="")
    gold_in_pool: bool | None = reads("gold_in_pool", default=None)
    ranking_ok: bool | None = reads("ranking", "ok", default=None)
    #: generation verdict: entailed | neutral | contradicted | abstained (None when not labelled)
    verdict: str | None = reads("generation", "verdict", default=None)
    refusal_justified: bool | None = reads("generation", "refusal_justified", default=None)
    #: end-to-end quality in [0, 1], None when the source has no score
    score: float | None = reads("score", default=None)
    #: the stage metrics of the record's ``metrics`` object (booleans as 0/1; None = undefined)
    metrics: Mapping[str, float | None] = reads("metrics", default_factory=dict)
    #: the outcome (`ragtrace_store.OUTCOMES`: a failure mode or ``incomplete``), None when the source
    #: gives none (a harness record)
    failure_mode: str | None = reads("failure_mode", default=None)

    @classmethod
    def from_record(cls, record: LabelRecord) -> LabelSummary:
        """The summary of a record of the contract: each field's value read where it says (`reads`)."""
        values = dict(zip(SUMMARY_PATHS, _FROM_RECORD(record), strict=True))
        values["metrics"] = {k: _as_float(v) for k, v in values["metrics"].items()}
        if record.extra.get(INCOMPLETE) is True:
            values["failure_mode"] = INCOMPLETE
        return checked_summary(values)

    @classmethod
    def from_json(cls, value: Any, where: str = "record") -> LabelSummary:
        """One per-trace JSON object; ``where`` (``file.jsonl:12``) starts every error
        (`ragtrace_store.LabelError`).

        An object with a ``failure_mode`` is a record of the contract and must be whole
        (`LabelRecord.from_json`); any other is a harness record: ``query_id``, ``gold_in_context``
        (at the top level or under ``retrieval``) and ``pass``, the rest optional."""
        rec = obj(value, where, "record")
        if "failure_mode" in rec:
            return cls.from_record(LabelRecord.from_json(rec, where))
        qid = rec.get("query_id")
        if qid is not None and (not isinstance(qid, str | int) or isinstance(qid, bool)):
            fail(where, f"'query_id' must be a string, got {qid!r}")
        if "pass" not in rec:
            fail(where, "missing 'pass' (true/false end-to-end verdict); every record needs query_id, "
                        "gold_in_context and pass")
        retrieval = _section(rec, "retrieval", where)
        ranking = _section(rec, "ranking", where)
        generation = _section(rec, "generation", where)
        if "gold_in_context" in rec:
            in_context, name = rec["gold_in_context"], "gold_in_context"
        elif "gold_in_context" in retrieval:
            in_context, name = retrieval["gold_in_context"], "retrieval.gold_in_context"
        else:
            fail(where, "missing 'gold_in_context' (true, false, or null when relevance is unknown)")
        in_pool, pool_name = ((rec["gold_in_pool"], "gold_in_pool") if "gold_in_pool" in rec
                              else (retrieval.get("gold_in_pool"), "retrieval.gold_in_pool"))
        verdict = generation.get("verdict")
        metrics_raw = obj(rec.get("metrics") or {}, where, "metrics")
        return cls(
            query_id="" if qid is None else str(qid),
            passed=bool(flag(rec["pass"], where, "pass", nullable=False)),
            gold_in_context=flag(in_context, where, name, nullable=True),
            trace_id=str(rec.get("trace_id") or ""),
            release=str(rec.get("release") or ""),
            service=str(rec.get("service") or ""),
            manifest_id=str(rec.get("manifest_id") or ""),
            gold_in_pool=flag(in_pool, where, pool_name, nullable=True),
            ranking_ok=flag(ranking.get("ok"), where, "ranking.ok", nullable=True),
            verdict=None if verdict is None else enum(GenerationVerdict, verdict, where, "generation.verdict").value,
            refusal_justified=flag(generation.get("refusal_justified"), where, "generation.refusal_justified",
                                   nullable=True),
            score=number(rec.get("score"), where, "score", unit=True),
            metrics={str(k): _as_float(metric(v, where, f"metrics.{k}")) for k, v in metrics_raw.items()},
        )


def _paths() -> dict[str, tuple[str, ...]]:
    undeclared = [f.name for f in dataclasses.fields(LabelSummary) if _PATH not in f.metadata]
    if undeclared:
        raise TypeError(f"LabelSummary fields {undeclared} do not say what they read: declare them with reads(...)")
    return {f.name: f.metadata[_PATH] for f in dataclasses.fields(LabelSummary)}


#: each field of `LabelSummary` and the path of the record's JSON object it reads
SUMMARY_PATHS: Final[dict[str, tuple[str, ...]]] = _paths()
#: the summary's values of a `LabelRecord`, in field order
_FROM_RECORD: Final = paths_reader(LabelRecord, tuple(SUMMARY_PATHS.values()))


def _as_float(value: float | bool | None) -> float | None:
    return None if value is None else float(value)


def _section(rec: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = rec.get(key)
    return {} if value is None else obj(value, where, key)


def checked_summary(values: dict[str, Any]) -> LabelSummary:
    """A `LabelSummary` of values already checked, with its attributes set at once: a frozen
    dataclass's ``__init__`` sets each field through ``object.__setattr__`` (5.7 µs a label, most of
    what a comparison's read of 42,000 stored labels cost in Python, against 0.2 µs here). The object
    is the one ``__init__`` makes (equal, same hash and repr, still frozen); ``values`` must name every
    field. For the store's readers, which check every value first."""
    summary = object.__new__(LabelSummary)
    object.__setattr__(summary, "__dict__", values)  # the dict itself, not a copy into a new one
    return summary
