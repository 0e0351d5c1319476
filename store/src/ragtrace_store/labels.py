"""The labels contract: the failure-mode and verdict names, and the per-trace label record.

`ragtrace audit` writes one `LabelRecord` per (trace, labeller manifest): a line of ``--per-trace``
JSON Lines and a row of the store's ``labels`` table (whose ``detail`` column holds the same JSON).
`ragtrace compare`, the review queues and the demo read them back. There is one writer and one
reader of each form:

- JSON: `LabelRecord.to_json` / `LabelRecord.from_json` (and `write_label_lines` /
  `read_label_lines` for JSON Lines files, one record per line, ``ensure_ascii=False``);
- the ``labels`` table: `write_labels` / `read_labels` (one row per ``(tenant, manifest_id,
  trace_id)``, the table's key; the newest version of a row wins, decided per key without ``FINAL``).

The primary failure mode of a query is the first that applies, in this precedence (DESIGN.md,
"Labels"; `FAILURE_MODES` keeps this order):

1. ``retrieval_gap``  — no relevant passage in the candidate pool P;
2. ``rank_inversion`` — relevant in P but pushed below distractors or out of the context C;
3. ``under_use``      — relevant in C but the answer abstains, is generic or is grounded elsewhere;
4. ``fabrication``    — claims supported by no supplied passage;
5. ``ok``.

Beside the modes, one outcome is not a failure mode: ``incomplete`` (`FailureMode.INCOMPLETE`,
not in `FAILURE_MODES`), a trace that lost attributes or a stage on its way (`TraceRecord.complete`
is False), whose pool, order, context or answer would be a guess. Its record says why in
``incomplete_reasons`` and knows nothing else: every boundary label is None (unknown), there is no
generation label, ``pass`` is false and ``score`` None. Records written before this outcome
existed read unchanged (they have no ``incomplete_reasons`` key).

Bad input raises `LabelError` (a `StoreError` and a `ValueError`) naming where, the field and
what to fix. ``None`` always means unknown or undefined, never False or 0.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final, NoReturn, TypeVar

import orjson

from ragtrace_store.clock import as_utc, utc_now
from ragtrace_store.errors import StoreError
from ragtrace_store.filters import TraceFilter
from ragtrace_store.json_lines import json_line_values

if TYPE_CHECKING:
    from ragtrace_store.client import Store

__all__ = [
    "CLAIM_VERDICTS",
    "FAILURE_MODES",
    "GENERATION_VERDICTS",
    "GOLD_SOURCES",
    "LABEL_COLUMNS",
    "METRIC_NAMES",
    "OUTCOMES",
    "SCORE_BASES",
    "ClaimRecord",
    "ClaimVerdict",
    "FailureMode",
    "GenerationRecord",
    "GenerationVerdict",
    "GoldSource",
    "LabelError",
    "LabelRecord",
    "RankingRecord",
    "RetrievalRecord",
    "ScoreBasis",
    "label_row",
    "newest_labels_sql",
    "read_label_lines",
    "read_labels",
    "write_label_lines",
    "write_labels",
]


class LabelError(StoreError, ValueError):
    """A label record (a JSON object or a ``labels`` row) breaks the contract; the message names
    where, the field, and what to fix."""


class FailureMode(StrEnum):
    """The primary failure mode of one query; members are in precedence order (module docstring)."""

    RETRIEVAL_GAP = "retrieval_gap"
    RANK_INVERSION = "rank_inversion"
    UNDER_USE = "under_use"
    FABRICATION = "fabrication"
    OK = "ok"
    #: not a failure mode: the outcome of a trace too incomplete to label (module docstring); last,
    #: and outside `FAILURE_MODES`
    INCOMPLETE = "incomplete"


class ClaimVerdict(StrEnum):
    """One claim of an answer against the supplied passages."""

    ENTAILED = "entailed"
    NEUTRAL = "neutral"
    CONTRADICTED = "contradicted"


class GenerationVerdict(StrEnum):
    """The whole answer: its claims aggregated, or an abstention (which makes no claim)."""

    ENTAILED = "entailed"
    NEUTRAL = "neutral"
    CONTRADICTED = "contradicted"
    ABSTAINED = "abstained"


class GoldSource(StrEnum):
    """Where a query's gold (relevant) set came from, in the order the audit prefers them."""

    SPAN = "span"
    #: evidence spans in source documents (`ragtrace_store.GoldSpan`), resolved to this trace's chunks
    EVIDENCE = "evidence"
    QRELS = "qrels"
    LABELLER = "labeller"
    NONE = "none"


class ScoreBasis(StrEnum):
    """What ``score``/``pass`` measure: correctness against a known reference answer, else groundedness in C."""

    REFERENCE = "reference"
    GROUNDING = "grounding"


# The names as plain strings (safe as dict keys for every JSON encoder), in declaration order.
#: failure modes, in precedence order (``incomplete`` is an outcome, not a mode: see `OUTCOMES`)
FAILURE_MODES: Final[tuple[str, ...]] = tuple(m.value for m in FailureMode if m is not FailureMode.INCOMPLETE)
#: every value of a record's ``failure_mode``: the failure modes, then ``incomplete``
OUTCOMES: Final[tuple[str, ...]] = (*FAILURE_MODES, FailureMode.INCOMPLETE.value)
CLAIM_VERDICTS: Final[tuple[str, ...]] = tuple(v.value for v in ClaimVerdict)
GENERATION_VERDICTS: Final[tuple[str, ...]] = tuple(v.value for v in GenerationVerdict)
GOLD_SOURCES: Final[tuple[str, ...]] = tuple(s.value for s in GoldSource)
SCORE_BASES: Final[tuple[str, ...]] = tuple(b.value for b in ScoreBasis)
#: the per-trace metrics the audit writes, in record order (other harnesses may add their own)
METRIC_NAMES: Final[tuple[str, ...]] = (
    "recall_5", "precision_5", "recip_rank", "ndcg_cut_5", "success_5", "groundedness", "abstained", "token_f1",
)

#: the columns of the ``labels`` table, in `label_row` order
LABEL_COLUMNS: Final[tuple[str, ...]] = (
    "tenant", "manifest_id", "trace_id", "query_id", "service", "release", "failure_mode", "gold_in_pool",
    "gold_in_context", "ranking_ok", "generation", "passed", "score", "confidence", "detail", "trace_time",
    "labelled_at",
)

_E = TypeVar("_E", bound=StrEnum)


# --- validation --------------------------------------------------------------------------------------
def _fail(where: str, message: str) -> NoReturn:
    raise LabelError(f"{where}: {message}")


def _enum(cls: type[_E], value: Any, where: str, name: str) -> _E:
    if isinstance(value, cls):
        return value
    if isinstance(value, str):
        try:
            return cls(value)
        except ValueError:
            pass
    # the names only for the message: this runs for every field of every label read
    _fail(where, f"{name!r} is {value!r}, not one of {', '.join(m.value for m in cls)}")


def _obj(value: Any, where: str, name: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        _fail(where, f"{name!r} must be a JSON object, got {type(value).__name__}")
    return value


def _check_keys(obj: Mapping[str, Any], where: str, prefix: str, required: Sequence[str],
                optional: Sequence[str] = ()) -> None:
    missing = [k for k in required if k not in obj]
    if missing:
        _fail(where, f"missing {', '.join(repr(prefix + k) for k in missing)}; the label record's "
                     f"{prefix.rstrip('.') or 'top level'} has {', '.join(required)}"
                     f"{' (optional: ' + ', '.join(optional) + ')' if optional else ''}")
    unknown = sorted(set(obj) - set(required) - set(optional))
    if unknown:
        _fail(where, f"unknown {', '.join(repr(prefix + k) for k in unknown)} in {prefix.rstrip('.')!r}; it has "
                     f"{', '.join((*required, *optional))}")


def _str(value: Any, where: str, name: str, *, required: bool = False) -> str:
    if not isinstance(value, str):
        _fail(where, f"{name!r} must be a string, got {value!r}")
    if required and not value:
        _fail(where, f"{name!r} must not be empty")
    return value


def _opt_str(value: Any, where: str, name: str) -> str | None:
    return None if value is None else _str(value, where, name)


def _bool(value: Any, where: str, name: str, *, nullable: bool) -> bool | None:
    if value is None and nullable:
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    _fail(where, f"{name!r} must be true or false{' (or null when unknown)' if nullable else ''}, got {value!r}")


def _num(value: Any, where: str, name: str, *, nullable: bool = True, unit: bool = False) -> float | None:
    if value is None and nullable:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        if unit and not 0.0 <= value <= 1.0:
            _fail(where, f"{name!r} is in [0, 1], got {value!r}")
        return float(value)
    _fail(where, f"{name!r} must be a finite number{' or null' if nullable else ''}, got {value!r}")


def _float(value: Any, where: str, name: str) -> float:
    out = _num(value, where, name, nullable=False)
    assert out is not None
    return out


def _rank(value: Any, where: str, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    _fail(where, f"{name!r} must be a rank (an integer >= 0, from 0) or null, got {value!r}")


def _metric(value: Any, where: str, name: str) -> float | bool | None:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int | float) and math.isfinite(value):
        return value
    _fail(where, f"{name!r} must be a finite number, true/false or null, got {value!r}")


# --- the record --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RetrievalRecord:
    """G ∩ P ≠ ∅ and G ∩ C ≠ ∅ (None when the gold set G is unknown), |G| and where G came from."""

    gold_in_pool: bool | None
    gold_in_context: bool | None
    n_gold: int
    gold_source: GoldSource

    def __post_init__(self) -> None:
        object.__setattr__(self, "gold_source", _enum(GoldSource, self.gold_source, "retrieval", "gold_source"))

    def to_json(self) -> dict[str, Any]:
        return {"gold_in_pool": self.gold_in_pool, "gold_in_context": self.gold_in_context, "n_gold": self.n_gold,
                "gold_source": self.gold_source.value}


@dataclass(frozen=True)
class RankingRecord:
    """Is the best gold ranked above every distractor (None when there is nothing to rank); ranks from 0."""

    ok: bool | None
    best_gold_rank: int | None
    best_distractor_rank: int | None

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "best_gold_rank": self.best_gold_rank, "best_distractor_rank": self.best_distractor_rank}


@dataclass(frozen=True)
class ClaimRecord:
    """One atomic claim of the answer, its verdict, and the passage that decided it (None if none)."""

    claim: str
    verdict: ClaimVerdict
    support: float
    contradiction: float
    passage_id: str | None

    def __post_init__(self) -> None:
        object.__setattr__(self, "verdict", _enum(ClaimVerdict, self.verdict, "claim", "verdict"))

    def to_json(self) -> dict[str, Any]:
        return {"claim": self.claim, "verdict": self.verdict.value, "support": self.support,
                "contradiction": self.contradiction, "passage_id": self.passage_id}


@dataclass(frozen=True)
class GenerationRecord:
    """The generation label: the verdict, claims, groundedness (None for abstentions and claim-less
    answers) and whether a refusal was justified (None unless the answer abstained with G known)."""

    verdict: GenerationVerdict
    groundedness: float | None
    abstained: bool
    refusal_justified: bool | None
    claims: tuple[ClaimRecord, ...] = ()
    #: the supported claims cite only non-gold passages (None in records written before it existed)
    grounded_elsewhere: bool | None = None
    #: the grounding labeller's confidence in ``verdict`` (None in records written before it existed)
    confidence: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "verdict", _enum(GenerationVerdict, self.verdict, "generation", "verdict"))
        object.__setattr__(self, "claims", tuple(self.claims))

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict.value, "groundedness": self.groundedness, "abstained": self.abstained,
                "refusal_justified": self.refusal_justified, "grounded_elsewhere": self.grounded_elsewhere,
                "confidence": self.confidence, "claims": [c.to_json() for c in self.claims]}


_TOP_REQUIRED = ("trace_id", "query_id", "release", "service", "manifest_id", "failure_mode", "retrieval", "ranking",
                 "generation", "metrics", "pass", "score", "confidence")
# gold_in_pool/gold_in_context: at the top level or under "retrieval" (the top level wins);
# score_basis was added with formula version 2, so older files lack it; incomplete_reasons only
# appears in records of incomplete traces
_TOP_OPTIONAL = ("gold_in_pool", "gold_in_context", "score_basis", "incomplete_reasons")
_KNOWN_TOP = frozenset((*_TOP_REQUIRED, *_TOP_OPTIONAL))


@dataclass(frozen=True)
class LabelRecord:
    """Every label of one query under one labeller manifest: the per-trace record of the contract.

    The JSON shape (`to_json`) is what `ragtrace audit --per-trace` writes and the ``labels.detail``
    column holds; ``passed`` is ``"pass"`` there, and ``gold_in_pool``/``gold_in_context`` appear
    both at the top level and under ``"retrieval"`` (reading, the top level wins). Top-level keys
    the contract does not know (a harness's own annotations) are kept in ``extra`` and written back
    after the known ones.
    """

    trace_id: str
    query_id: str
    release: str
    service: str
    manifest_id: str
    failure_mode: FailureMode
    retrieval: RetrievalRecord
    ranking: RankingRecord
    #: None when the answer was not judged (``--stages retrieval``, or no answer)
    generation: GenerationRecord | None
    #: end-to-end verdict
    passed: bool
    #: end-to-end quality in [0, 1]; None when undefined (abstentions, claim-less answers)
    score: float | None
    #: the labeller's confidence in ``failure_mode``, in [0, 1]
    confidence: float | None
    #: per-trace metrics (`METRIC_NAMES`); values are numbers, booleans or None (undefined)
    metrics: Mapping[str, float | bool | None] = field(default_factory=dict, hash=False)
    score_basis: ScoreBasis | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, hash=False)
    #: why the trace is incomplete (``"<reason>: <detail>"``, `TraceRecord.incomplete_reasons`);
    #: non-empty exactly when ``failure_mode`` is ``incomplete``
    incomplete_reasons: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "failure_mode", _enum(FailureMode, self.failure_mode, "label record",
                                                       "failure_mode"))
        object.__setattr__(self, "incomplete_reasons", tuple(self.incomplete_reasons))
        if (self.failure_mode is FailureMode.INCOMPLETE) != bool(self.incomplete_reasons):
            _fail(f"label record trace_id={self.trace_id}",
                  "an incomplete record (failure_mode 'incomplete') needs its incomplete_reasons, and only an "
                  "incomplete record has them")
        if self.score_basis is not None:
            object.__setattr__(self, "score_basis", _enum(ScoreBasis, self.score_basis, "label record",
                                                          "score_basis"))
        object.__setattr__(self, "metrics", dict(self.metrics))
        clash = sorted(set(self.extra) & _KNOWN_TOP)
        if clash:
            _fail("label record", f"extra keys {clash} are fields of the record; set the fields instead")
        object.__setattr__(self, "extra", dict(self.extra))

    @classmethod
    def incomplete(cls, *, trace_id: str, query_id: str, release: str, service: str, manifest_id: str,
                   reasons: Sequence[str], n_gold: int = 0,
                   gold_source: GoldSource | str = "none") -> LabelRecord:
        """The record of a trace too incomplete to label: its reasons, and nothing guessed."""
        return cls(trace_id=trace_id, query_id=query_id, release=release, service=service,
                   manifest_id=manifest_id, failure_mode=FailureMode.INCOMPLETE,
                   retrieval=RetrievalRecord(None, None, n_gold, GoldSource(gold_source)),
                   ranking=RankingRecord(None, None, None), generation=None, passed=False, score=None,
                   confidence=None, incomplete_reasons=tuple(reasons))

    @property
    def is_incomplete(self) -> bool:
        return self.failure_mode is FailureMode.INCOMPLETE

    @property
    def gold_in_pool(self) -> bool | None:
        return self.retrieval.gold_in_pool

    @property
    def gold_in_context(self) -> bool | None:
        return self.retrieval.gold_in_context

    # --- JSON ---------------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The JSON object of the contract (key order as `ragtrace audit` has always written it)."""
        out: dict[str, Any] = {
            "trace_id": self.trace_id,
            "query_id": self.query_id,
            "release": self.release,
            "service": self.service,
            "manifest_id": self.manifest_id,
            "failure_mode": self.failure_mode.value,
            "gold_in_pool": self.gold_in_pool,
            "gold_in_context": self.gold_in_context,
            "retrieval": self.retrieval.to_json(),
            "ranking": self.ranking.to_json(),
            "generation": None if self.generation is None else self.generation.to_json(),
            "metrics": dict(self.metrics),
            "pass": self.passed,
            "score": self.score,
            "score_basis": None if self.score_basis is None else self.score_basis.value,
            "confidence": self.confidence,
        }
        if self.incomplete_reasons:  # only then: complete records keep the bytes they always had
            out["incomplete_reasons"] = list(self.incomplete_reasons)
        out.update(self.extra)
        return out

    def to_json_line(self) -> str:
        """One line of JSON Lines (no newline): `to_json` as ``json.dumps(..., ensure_ascii=False)``."""
        return json.dumps(self.to_json(), ensure_ascii=False)

    @classmethod
    def from_json(cls, obj: Any, where: str = "label record") -> LabelRecord:
        """Validate and read one JSON object of the contract; ``where`` (``file.jsonl:12``, a row)
        starts every error message."""
        rec = _obj(obj, where, "record")
        _check_keys({k: v for k, v in rec.items() if k in _KNOWN_TOP}, where, "", _TOP_REQUIRED, _TOP_OPTIONAL)

        retrieval_raw = _obj(rec["retrieval"], where, "retrieval")
        _check_keys(retrieval_raw, where, "retrieval.", ("n_gold", "gold_source"), ("gold_in_pool", "gold_in_context"))
        gold: dict[str, bool | None] = {}
        for key in ("gold_in_pool", "gold_in_context"):
            if key in rec:
                gold[key] = _bool(rec[key], where, key, nullable=True)
            elif key in retrieval_raw:
                gold[key] = _bool(retrieval_raw[key], where, f"retrieval.{key}", nullable=True)
            else:
                _fail(where, f"missing {key!r} (true, false, or null when relevance is unknown)")
        n_gold = retrieval_raw["n_gold"]
        if not isinstance(n_gold, int) or isinstance(n_gold, bool) or n_gold < 0:
            _fail(where, f"'retrieval.n_gold' must be the number of gold documents (an integer >= 0), got {n_gold!r}")
        retrieval = RetrievalRecord(gold["gold_in_pool"], gold["gold_in_context"], n_gold,
                                    _enum(GoldSource, retrieval_raw["gold_source"], where, "retrieval.gold_source"))

        ranking_raw = _obj(rec["ranking"], where, "ranking")
        _check_keys(ranking_raw, where, "ranking.", ("ok", "best_gold_rank", "best_distractor_rank"))
        ranking = RankingRecord(_bool(ranking_raw["ok"], where, "ranking.ok", nullable=True),
                                _rank(ranking_raw["best_gold_rank"], where, "ranking.best_gold_rank"),
                                _rank(ranking_raw["best_distractor_rank"], where, "ranking.best_distractor_rank"))

        generation = None if rec["generation"] is None else _generation(rec["generation"], where)

        metrics_raw = _obj(rec["metrics"], where, "metrics")
        metrics = {str(k): _metric(v, where, f"metrics.{k}") for k, v in metrics_raw.items()}
        basis = rec.get("score_basis")
        reasons = rec.get("incomplete_reasons", [])
        if not isinstance(reasons, list) or not all(isinstance(x, str) and x for x in reasons):
            _fail(where, f"'incomplete_reasons' must be a list of non-empty strings, got {reasons!r}")
        return cls(
            trace_id=_str(rec["trace_id"], where, "trace_id", required=True),
            query_id=_str(rec["query_id"], where, "query_id"),
            release=_str(rec["release"], where, "release"),
            service=_str(rec["service"], where, "service"),
            manifest_id=_str(rec["manifest_id"], where, "manifest_id", required=True),
            failure_mode=_enum(FailureMode, rec["failure_mode"], where, "failure_mode"),
            retrieval=retrieval,
            ranking=ranking,
            generation=generation,
            passed=bool(_bool(rec["pass"], where, "pass", nullable=False)),
            score=_num(rec["score"], where, "score", unit=True),
            confidence=_num(rec["confidence"], where, "confidence"),
            metrics=metrics,
            score_basis=None if basis is None else _enum(ScoreBasis, basis, where, "score_basis"),
            extra={k: v for k, v in rec.items() if k not in _KNOWN_TOP},
            incomplete_reasons=tuple(reasons),
        )


def _generation(value: Any, where: str) -> GenerationRecord:
    gen = _obj(value, where, "generation")
    _check_keys(gen, where, "generation.", ("verdict", "groundedness", "abstained", "refusal_justified", "claims"),
                ("grounded_elsewhere", "confidence"))
    claims_raw = gen["claims"]
    if not isinstance(claims_raw, list):
        _fail(where, f"'generation.claims' must be a list of claim objects, got {type(claims_raw).__name__}")
    claims = []
    for i, raw in enumerate(claims_raw):
        name = f"generation.claims[{i}]"
        c = _obj(raw, where, name)
        _check_keys(c, where, f"{name}.", ("claim", "verdict", "support", "contradiction", "passage_id"))
        claims.append(ClaimRecord(
            claim=_str(c["claim"], where, f"{name}.claim"),
            verdict=_enum(ClaimVerdict, c["verdict"], where, f"{name}.verdict"),
            support=_float(c["support"], where, f"{name}.support"),
            contradiction=_float(c["contradiction"], where, f"{name}.contradiction"),
            passage_id=_opt_str(c["passage_id"], where, f"{name}.passage_id"),
        ))
    return GenerationRecord(
        verdict=_enum(GenerationVerdict, gen["verdict"], where, "generation.verdict"),
        groundedness=_num(gen["groundedness"], where, "generation.groundedness"),
        abstained=bool(_bool(gen["abstained"], where, "generation.abstained", nullable=False)),
        refusal_justified=_bool(gen["refusal_justified"], where, "generation.refusal_justified", nullable=True),
        claims=tuple(claims),
        grounded_elsewhere=_bool(gen.get("grounded_elsewhere"), where, "generation.grounded_elsewhere",
                                 nullable=True),
        confidence=_num(gen.get("confidence"), where, "generation.confidence"),
    )


# --- JSON Lines --------------------------------------------------------------------------------------
def write_label_lines(target: str | Path | IO[str], records: Iterable[LabelRecord]) -> None:
    """Records as JSON Lines to a path (parent folders created, file replaced) or an open text file."""
    if isinstance(target, str | Path):
        path = Path(target)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8") as fh:
            write_label_lines(fh, records)
        return
    for rec in records:
        target.write(rec.to_json_line() + "\n")


def read_label_lines(path: str | Path) -> list[LabelRecord]:
    """Every record of a JSON Lines file (blank lines skipped), read by `ragtrace_store.json_line_values`:
    errors start ``PATH:N:``."""
    return [LabelRecord.from_json(obj, where) for where, obj in json_line_values(path, LabelError, _LINE_SHAPE)]


#: what each line of a label file must be (the end of a JSON Lines error)
_LINE_SHAPE = "expected one label record per line (a JSON object, as `ragtrace audit --per-trace` writes)"


# --- the labels table --------------------------------------------------------------------------------
def label_row(record: LabelRecord, *, tenant: str, trace_time: datetime,
              labelled_at: datetime | None = None) -> tuple[Any, ...]:
    """The ``labels`` row of one record, in `LABEL_COLUMNS` order; ``detail`` is `LabelRecord.to_json_line`."""
    gen = record.generation
    return (
        tenant, record.manifest_id, record.trace_id, record.query_id, record.service, record.release,
        record.failure_mode.value, record.gold_in_pool, record.gold_in_context, record.ranking.ok,
        gen.verdict.value if gen is not None else "", record.passed, record.score, record.confidence,
        record.to_json_line(), as_utc(trace_time), as_utc(labelled_at) if labelled_at else utc_now(),
    )


def write_labels(store: Store, records: Iterable[LabelRecord], *, tenant: str,
                 trace_times: Mapping[str, datetime], labelled_at: datetime | None = None) -> int:
    """Insert one ``labels`` row per record (a newer row of the same (tenant, manifest, trace)
    replaces the older one); ``trace_times`` maps each trace id to its trace's start time (the
    table's partition key). Returns the number of rows written."""
    at = as_utc(labelled_at) if labelled_at else utc_now()
    rows = []
    for rec in records:
        if rec.trace_id not in trace_times:
            _fail(f"label record trace_id={rec.trace_id}", "no trace time given; pass the trace's start time "
                                                            "in trace_times")
        rows.append(label_row(rec, tenant=tenant, trace_time=trace_times[rec.trace_id], labelled_at=at))
    if rows:
        store.insert("labels", rows, LABEL_COLUMNS)
    return len(rows)


_READ_CHUNK = 5000


def read_labels(store: Store, *, tenant: str, manifest_id: str | None = None, release: str | None = None,
                service: str | None = None, trace_ids: Sequence[str] | None = None) -> list[LabelRecord]:
    """The stored records matching the filters (the newest version of each row).

    Ordered by manifest, the most recently labelled manifest first, then by trace time and trace
    id. The columns are authoritative for the keys they carry; ``detail`` holds the rest of the
    record. ``trace_ids`` are read in chunks, so any number may be given.
    """
    rows = _read_label_columns(store, _RECORD_COLUMNS, tenant=tenant, manifest_id=manifest_id, release=release,
                              service=service, trace_ids=trace_ids)
    return [_from_row(tenant, row) for row in rows]


#: the columns `read_labels` builds a record from
_RECORD_COLUMNS = ("manifest_id", "trace_id", "query_id", "release", "service", "failure_mode", "gold_in_pool",
                   "gold_in_context", "passed", "score", "confidence", "detail")


def _read_label_columns(store: Store, columns: Sequence[str], *, tenant: str, manifest_id: str | None = None,
                       release: str | None = None, service: str | None = None,
                       trace_ids: Sequence[str] | None = None) -> list[tuple[Any, ...]]:
    """`read_labels`' rows (the newest version of each, the same filters and order) as ``columns``:
    SQL expressions over the table's columns, written by the caller's code (never input), e.g.
    ``JSONExtractRaw(detail, 'metrics')`` for a reader that needs one part of the record, not all of
    it validated into a `LabelRecord`."""
    where, params = TraceFilter(tenant=tenant, release=release, service=service).conditions()
    if manifest_id is not None:
        where.append("manifest_id = {manifest_id:String}")
        params["manifest_id"] = manifest_id

    table = store.table("labels")

    def sql(conds: list[str]) -> str:
        # the keys with a row that matches (by the table's key, so only their rows are read), then
        # the newest version of each and the filters on it
        keys = ["tenant = {tenant:String}",
                f"(manifest_id, trace_id) IN (SELECT manifest_id, trace_id FROM {table} WHERE {' AND '.join(conds)})"]
        return (f"SELECT {', '.join(columns)} FROM (SELECT *, max(labelled_at) OVER (PARTITION BY manifest_id) "
                f"AS newest FROM ({newest_labels_sql(store, keys, conds)})) "
                "ORDER BY newest DESC, manifest_id, trace_time, trace_id")

    if trace_ids is None:
        return store.query_rows(sql(where), params)
    ids = list(trace_ids)
    rows: list[tuple[Any, ...]] = []
    for i in range(0, len(ids), _READ_CHUNK):
        rows += store.query_rows(sql([*where, "trace_id IN {ids:Array(String)}"]),
                                 {**params, "ids": ids[i : i + _READ_CHUNK]})
    return rows


def newest_labels_sql(store: Store, keys: Sequence[str], values: Sequence[str] = (), *,
                      columns: Sequence[str] | None = None) -> str:
    """A subquery of the ``labels`` rows that are the newest version (``labelled_at``) of their
    (manifest, trace) and match the conditions: the store's one way of reading "the newest label",
    which every reader of labels goes through (`read_labels`, the comparisons' reads, listings,
    series, queues).

    ``keys`` (the tenant's ``tenant = {tenant:String}`` among them) are conditions on the key
    (tenant, manifest, trace id: a manifest, a list of ids, a set of keys), so they hold for every
    version of a key or for none and only those keys' rows are read; ``values`` are conditions on
    what a version says (a failure mode, a release, a time), applied to the newest version only, so
    an older version that matches never stands for a key whose newest does not. ``columns`` (SQL over
    the table's columns, written by the caller's code, never input) are what the subquery holds
    besides ``manifest_id`` and ``trace_id``, by default every column (``groundedness`` included).

    The strategy: ``FINAL`` over the key ranges ``keys`` select, ``keys`` as ``PREWHERE`` (applied to
    every version as it is read, before the versions are collapsed: right for a key condition, which
    every version of a key meets or none does) and ``values`` as ``WHERE`` (applied after). Exact under
    ReplacingMergeTree before its merges, which collapse versions only within a merge of one monthly
    partition (a label's trace time, the partition key, moves when its trace's root is decided again),
    because ``FINAL`` collapses them at read time, across parts and partitions, as long as
    ``optimize_move_to_prewhere_if_final = 0`` (else a value condition may be moved before the
    collapse, and an older version that matches stands for its key) and
    ``do_not_merge_across_partitions_select_final = 0``: ClickHouse's defaults, which `Store` pins
    for every query so that a server's profile cannot change them. Cost, against sorting each key's
    versions (``ORDER BY labelled_at DESC LIMIT 1 BY manifest_id, trace_id``, the other exact way),
    on chDB 26.9: 2 M labels in 41 unmerged parts (a newer version of 5 % of one manifest in another
    partition): the labels of 50 trace ids 4.5-5.6 ms against 5.7-6.9 (500 labels of them under every
    manifest: 6.6-9.8 against 8.4-10.3), a whole manifest's failure modes 31-39 against 37-47 ms, its
    every column 43-66 against 215-250 ms; at 10 M traces (one merged part), the 42,079 newest labels
    of two releases under one manifest 29 ms against 186 ms. ``FINAL`` without the keys as
    ``PREWHERE`` reads every column of every key range before the filter: 73 ms for the 50 ids. Ties
    (two versions of one key with the same ``labelled_at``, which one audit never writes) keep the
    one written last."""
    # `*` leaves out MATERIALIZED columns: groundedness (0007_web.sql) is named
    held = "*, groundedness" if columns is None else ", ".join(dict.fromkeys(("manifest_id", "trace_id", *columns)))
    # On a cluster each shard's FINAL collapses its own rows: exact, since a key's versions all sit
    # on one shard (labels are sharded by trace id); LIMIT 1 BY on the node that asks then keeps one
    # row of a key that two shards answer for (a shard's replica read twice; the test cluster, whose
    # two shards are one set of tables). A set of keys, no sort: nothing on one node.
    once = " LIMIT 1 BY manifest_id, trace_id" if store.variant == "cluster" else ""
    return (f"SELECT {held} FROM {store.table('labels')} FINAL PREWHERE {' AND '.join(keys)}"
            + (f" WHERE {' AND '.join(values)}" if values else "") + once)


def _from_row(tenant: str, row: Sequence[Any]) -> LabelRecord:
    manifest, trace_id, query_id, release, service, mode, in_pool, in_ctx, passed, score, confidence, detail = row[:12]
    where = f"labels row tenant={tenant} manifest_id={manifest} trace_id={trace_id}"
    try:
        # orjson: the same values as json.loads, several times faster on the rows a compare reads
        rec = orjson.loads(detail) if detail else {}
    except orjson.JSONDecodeError as exc:
        _fail(where, f"the detail column is not JSON ({exc.msg}); re-run `ragtrace audit --no-resume`")
    if not isinstance(rec, dict):
        _fail(where, f"the detail column must be a JSON object, got {type(rec).__name__}; re-run "
                     "`ragtrace audit --no-resume`")
    rec.update(trace_id=str(trace_id), query_id=str(query_id), release=str(release), service=str(service),
               manifest_id=str(manifest), failure_mode=str(mode), score=None if score is None else float(score))
    rec["pass"] = bool(passed)
    if confidence is not None:
        rec["confidence"] = float(confidence)
    rec.setdefault("gold_in_pool", in_pool)
    rec.setdefault("gold_in_context", in_ctx)
    return LabelRecord.from_json(rec, where)
