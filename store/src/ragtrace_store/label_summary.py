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

``None`` means unknown or undefined, never False or 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ragtrace_store.labels import (
    FailureMode,
    GenerationVerdict,
    LabelRecord,
    _bool,
    _enum,
    _fail,
    _metric,
    _num,
    _obj,
)

__all__ = ["LabelSummary", "checked_summary"]

#: the outcome of a trace that lost attributes or a stage: its own outcome, never a failure mode. A
#: record of the contract says so with failure_mode ``incomplete``; records written before that outcome
#: existed say it with ``"incomplete": true`` (a key kept beside the contract's, in `LabelRecord.extra`).
INCOMPLETE = FailureMode.INCOMPLETE.value


@dataclass(frozen=True)
class LabelSummary:
    """One labelled query of one release, as a comparison reads it. ``None`` means unknown."""

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
    #: the stage metrics of the record's ``metrics`` object (booleans as 0/1; None = undefined)
    metrics: Mapping[str, float | None] = field(default_factory=dict)
    #: the outcome (`ragtrace_store.OUTCOMES`: a failure mode or ``incomplete``), None when the source
    #: gives none (a harness record)
    failure_mode: str | None = None

    @classmethod
    def from_record(cls, record: LabelRecord) -> LabelSummary:
        """The summary of a record of the contract: the one mapping of its fields to the summary's."""
        gen = record.generation
        return cls(
            query_id=record.query_id, passed=record.passed, gold_in_context=record.gold_in_context,
            trace_id=record.trace_id, release=record.release, service=record.service,
            manifest_id=record.manifest_id, gold_in_pool=record.gold_in_pool, ranking_ok=record.ranking.ok,
            verdict=gen.verdict.value if gen is not None else None,
            refusal_justified=gen.refusal_justified if gen is not None else None, score=record.score,
            metrics={k: _as_float(v) for k, v in record.metrics.items()},
            failure_mode=INCOMPLETE if record.extra.get(INCOMPLETE) is True else record.failure_mode.value,
        )

    @classmethod
    def from_json(cls, obj: Any, where: str = "record") -> LabelSummary:
        """One per-trace JSON object; ``where`` (``file.jsonl:12``) starts every error
        (`ragtrace_store.LabelError`).

        An object with a ``failure_mode`` is a record of the contract and must be whole
        (`LabelRecord.from_json`); any other is a harness record: ``query_id``, ``gold_in_context``
        (at the top level or under ``retrieval``) and ``pass``, the rest optional."""
        rec = _obj(obj, where, "record")
        if "failure_mode" in rec:
            return cls.from_record(LabelRecord.from_json(rec, where))
        qid = rec.get("query_id")
        if qid is not None and (not isinstance(qid, str | int) or isinstance(qid, bool)):
            _fail(where, f"'query_id' must be a string, got {qid!r}")
        if "pass" not in rec:
            _fail(where, "missing 'pass' (true/false end-to-end verdict); every record needs query_id, "
                         "gold_in_context and pass")
        retrieval = _section(rec, "retrieval", where)
        ranking = _section(rec, "ranking", where)
        generation = _section(rec, "generation", where)
        if "gold_in_context" in rec:
            in_context, name = rec["gold_in_context"], "gold_in_context"
        elif "gold_in_context" in retrieval:
            in_context, name = retrieval["gold_in_context"], "retrieval.gold_in_context"
        else:
            _fail(where, "missing 'gold_in_context' (true, false, or null when relevance is unknown)")
        in_pool, pool_name = ((rec["gold_in_pool"], "gold_in_pool") if "gold_in_pool" in rec
                              else (retrieval.get("gold_in_pool"), "retrieval.gold_in_pool"))
        verdict = generation.get("verdict")
        metrics_raw = _obj(rec.get("metrics") or {}, where, "metrics")
        return cls(
            query_id="" if qid is None else str(qid),
            passed=bool(_bool(rec["pass"], where, "pass", nullable=False)),
            gold_in_context=_bool(in_context, where, name, nullable=True),
            trace_id=str(rec.get("trace_id") or ""),
            release=str(rec.get("release") or ""),
            service=str(rec.get("service") or ""),
            manifest_id=str(rec.get("manifest_id") or ""),
            gold_in_pool=_bool(in_pool, where, pool_name, nullable=True),
            ranking_ok=_bool(ranking.get("ok"), where, "ranking.ok", nullable=True),
            verdict=None if verdict is None else _enum(GenerationVerdict, verdict, where, "generation.verdict").value,
            refusal_justified=_bool(generation.get("refusal_justified"), where, "generation.refusal_justified",
                                    nullable=True),
            score=_num(rec.get("score"), where, "score", unit=True),
            metrics={str(k): _as_float(_metric(v, where, f"metrics.{k}")) for k, v in metrics_raw.items()},
        )


def _as_float(value: float | bool | None) -> float | None:
    return None if value is None else float(value)


def _section(rec: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = rec.get(key)
    return {} if value is None else _obj(value, where, key)


def checked_summary(values: dict[str, Any]) -> LabelSummary:
    """A `LabelSummary` of values already checked, with its attributes set at once: a frozen
    dataclass's ``__init__`` sets each field through ``object.__setattr__`` (5.7 µs a label, most of
    what a comparison's read of 42,000 stored labels cost in Python, against 0.2 µs here). The object
    is the one ``__init__`` makes (equal, same hash and repr, still frozen); ``values`` must name every
    field. For the store's readers, which check every value first."""
    summary = object.__new__(LabelSummary)
    object.__setattr__(summary, "__dict__", values)  # the dict itself, not a copy into a new one
    return summary
