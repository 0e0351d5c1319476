"""The labels contract: the failure-mode and verdict names, and the per-trace label record.

`ragtrace audit` writes one `LabelRecord` per (trace, labeller manifest): a line of ``--per-trace``
JSON Lines and a row of the store's ``labels`` table (`ragtrace_store.label_table`, whose ``detail``
column holds the same JSON). `ragtrace compare`, the review queues and the demo read them back. There
is one writer and one reader of each form:

- JSON: `LabelRecord.to_json` / `LabelRecord.from_json` (and `write_label_lines` /
  `read_label_lines` for JSON Lines files, one record per line, ``ensure_ascii=False``);
- the ``labels`` table: `ragtrace_store.label_table.write_labels` / `read_labels`.

Each field of the record and of the objects it nests is declared once, below, with
`ragtrace_store.label_fields.key`: its check, how it is written, and the ``labels`` columns that copy
it. The JSON writer and parser, the table's columns and rows, and the comparisons' summary follow the
declarations, so adding a field is its declaration here, plus a migration when a column copies it.

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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import partial
from operator import attrgetter
from pathlib import Path
from typing import IO, Any, Final, Self

from ragtrace_store.json_lines import json_line_values
from ragtrace_store.label_fields import (
    Column,
    LabelError,
    Nested,
    declared,
    enum,
    fail,
    flag,
    json_of,
    key,
    known_keys,
    metric,
    number,
    obj,
    parsed_fields,
    rest,
    text,
)

__all__ = [
    "CLAIM_VERDICTS",
    "FAILURE_MODES",
    "GENERATION_VERDICTS",
    "GOLD_SOURCES",
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
    "read_label_lines",
    "write_label_lines",
]


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


# --- the checks of the record's values (`ragtrace_store.label_fields` has the plain ones) ----------------
# partial objects rather than wrapping functions: they run for every value of every record read
_id = partial(text, required=True)
_flag = partial(flag, nullable=False)
_maybe = partial(flag, nullable=True)
_float = partial(number, nullable=False)
_unit = partial(number, unit=True)


def _opt_text(value: Any, where: str, name: str) -> str | None:
    return None if value is None else text(value, where, name)


def _count(value: Any, where: str, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        fail(where, f"{name!r} must be the number of gold documents (an integer >= 0), got {value!r}")
    return value


def _rank(value: Any, where: str, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    fail(where, f"{name!r} must be a rank (an integer >= 0, from 0) or null, got {value!r}")


def _metrics(value: Any, where: str, name: str) -> dict[str, float | bool | None]:
    return {str(k): metric(v, where, f"{name}.{k}") for k, v in obj(value, where, name).items()}


def _basis(value: Any, where: str, name: str) -> ScoreBasis | None:
    return None if value is None else enum(ScoreBasis, value, where, name)


def _reasons(value: Any, where: str, name: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(x, str) and x for x in value):
        fail(where, f"{name!r} must be a list of non-empty strings, got {value!r}")
    return tuple(value)


#: an enum member as JSON: its value (a C getter: it runs for every enum of every record written)
_value = attrgetter("value")


def _opt_value(member: StrEnum | None) -> str | None:
    return None if member is None else member.value


#: what a gold flag is, for the error when a record has it neither at the top level nor in "retrieval"
_GOLD_FLAG = "true, false, or null when relevance is unknown"


# --- the record --------------------------------------------------------------------------------------
# Each field is declared with `key` (its check, then how it is written and stored); the order of the
# fields is the order of the JSON object's keys.
class _JsonObject:
    def to_json(self) -> dict[str, Any]:
        """The JSON object of the contract: the declared fields in declaration order."""
        return json_of(self)


@dataclass(frozen=True)
class RetrievalRecord(_JsonObject):
    """G ∩ P ≠ ∅ and G ∩ C ≠ ∅ (None when the gold set G is unknown), |G| and where G came from."""

    # optional in this object: a record gives them at its top level too, and the top level wins
    gold_in_pool: bool | None = key(_maybe, optional=True, hint=_GOLD_FLAG)
    gold_in_context: bool | None = key(_maybe, optional=True, hint=_GOLD_FLAG)
    n_gold: int = key(_count)
    gold_source: GoldSource = key(partial(enum, GoldSource), dump=_value)

    def __post_init__(self) -> None:
        object.__setattr__(self, "gold_source", enum(GoldSource, self.gold_source, "retrieval", "gold_source"))


@dataclass(frozen=True)
class RankingRecord(_JsonObject):
    """Is the best gold ranked above every distractor (None when there is nothing to rank); ranks from 0."""

    ok: bool | None = key(_maybe)
    best_gold_rank: int | None = key(_rank)
    best_distractor_rank: int | None = key(_rank)


@dataclass(frozen=True)
class ClaimRecord(_JsonObject):
    """One atomic claim of the answer, its verdict, and the passage that decided it (None if none)."""

    claim: str = key(text)
    verdict: ClaimVerdict = key(partial(enum, ClaimVerdict), dump=_value)
    support: float = key(_float)
    contradiction: float = key(_float)
    passage_id: str | None = key(_opt_text)

    def __post_init__(self) -> None:
        object.__setattr__(self, "verdict", enum(ClaimVerdict, self.verdict, "claim", "verdict"))


@dataclass(frozen=True)
class GenerationRecord(_JsonObject):
    """The generation label: the verdict, claims, groundedness (None for abstentions and claim-less
    answers) and whether a refusal was justified (None unless the answer abstained with G known)."""

    verdict: GenerationVerdict = key(partial(enum, GenerationVerdict), dump=_value)
    groundedness: float | None = key(number)
    abstained: bool = key(_flag)
    refusal_justified: bool | None = key(_maybe)
    #: the supported claims cite only non-gold passages (None in records written before it existed)
    grounded_elsewhere: bool | None = key(_maybe, optional=True, default=None, kw_only=True)
    #: the grounding labeller's confidence in ``verdict`` (None in records written before it existed)
    confidence: float | None = key(number, optional=True, default=None, kw_only=True)
    claims: tuple[ClaimRecord, ...] = key(Nested(ClaimRecord, many="claim"), default=())

    def __post_init__(self) -> None:
        object.__setattr__(self, "verdict", enum(GenerationVerdict, self.verdict, "generation", "verdict"))
        object.__setattr__(self, "claims", tuple(self.claims))


@dataclass(frozen=True)
class LabelRecord(_JsonObject):
    """Every label of one query under one labeller manifest: the per-trace record of the contract.

    The JSON shape (`to_json`) is what `ragtrace audit --per-trace` writes and the ``labels.detail``
    column holds, its keys in the order of the fields below; ``passed`` is ``"pass"`` there, and
    ``gold_in_pool``/``gold_in_context`` appear both at the top level and under ``"retrieval"``
    (reading, the top level wins). Top-level keys the contract does not know (a harness's own
    annotations) are kept in ``extra`` and written back after the known ones. ``column=`` and
    ``columns=`` name the ``labels`` columns that copy a field (`ragtrace_store.label_table`).
    """

    trace_id: str = key(_id, column="trace_id")
    query_id: str = key(text, column="query_id")
    release: str = key(text, column="release")
    service: str = key(text, column="service")
    manifest_id: str = key(_id, column="manifest_id")
    failure_mode: FailureMode = key(partial(enum, FailureMode), dump=_value, column="failure_mode")
    retrieval: RetrievalRecord = key(Nested(RetrievalRecord), lifted=("gold_in_pool", "gold_in_context"),
                                     columns=(Column("gold_in_pool", ("gold_in_pool",)),
                                              Column("gold_in_context", ("gold_in_context",))))
    ranking: RankingRecord = key(Nested(RankingRecord), columns=(Column("ranking_ok", ("ranking", "ok")),))
    #: None when the answer was not judged (``--stages retrieval``, or no answer)
    generation: GenerationRecord | None = key(Nested(GenerationRecord, nullable=True),
                                              columns=(Column("generation", ("generation", "verdict"), empty=""),))
    #: per-trace metrics (`METRIC_NAMES`); values are numbers, booleans or None (undefined)
    metrics: Mapping[str, float | bool | None] = key(_metrics, dump=dict, default_factory=dict, hash=False,
                                                     kw_only=True)
    #: end-to-end verdict
    passed: bool = key(_flag, json="pass", column="passed")
    #: end-to-end quality in [0, 1]; None when undefined (abstentions, claim-less answers)
    score: float | None = key(_unit, column="score")
    #: added with formula version 2: older records lack it
    score_basis: ScoreBasis | None = key(_basis, dump=_opt_value, optional=True, default=None, kw_only=True)
    #: the labeller's confidence in ``failure_mode``, in [0, 1]
    confidence: float | None = key(number, column="confidence")
    #: why the trace is incomplete (``"<reason>: <detail>"``, `TraceRecord.incomplete_reasons`);
    #: non-empty exactly when ``failure_mode`` is ``incomplete``, and only then written (complete
    #: records keep the bytes they always had)
    incomplete_reasons: tuple[str, ...] = key(_reasons, dump=list, optional=True, omit_empty=True, default=(),
                                              kw_only=True)
    #: the top-level keys the contract does not know, kept as they are
    extra: Mapping[str, Any] = rest(default_factory=dict, hash=False, kw_only=True)

    def __post_init__(self) -> None:
        object.__setattr__(self, "failure_mode", enum(FailureMode, self.failure_mode, "label record",
                                                      "failure_mode"))
        object.__setattr__(self, "incomplete_reasons", tuple(self.incomplete_reasons))
        if (self.failure_mode is FailureMode.INCOMPLETE) != bool(self.incomplete_reasons):
            fail(f"label record trace_id={self.trace_id}",
                 "an incomplete record (failure_mode 'incomplete') needs its incomplete_reasons, and only an "
                 "incomplete record has them")
        if self.score_basis is not None:
            object.__setattr__(self, "score_basis", enum(ScoreBasis, self.score_basis, "label record",
                                                         "score_basis"))
        object.__setattr__(self, "metrics", dict(self.metrics))
        clash = sorted(set(self.extra) & known_keys(type(self)))
        if clash:
            fail("label record", f"extra keys {clash} are fields of the record; set the fields instead")
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
    def to_json_line(self) -> str:
        """One line of JSON Lines (no newline): `to_json` as ``json.dumps(..., ensure_ascii=False)``."""
        return json.dumps(self.to_json(), ensure_ascii=False)

    @classmethod
    def from_json(cls, value: Any, where: str = "label record") -> Self:
        """Validate and read one JSON object of the contract; ``where`` (``file.jsonl:12``, a row)
        starts every error message. Keys the contract does not know are kept (``extra``)."""
        return cls(**parsed_fields(cls, obj(value, where, "record"), where))


# every field declared (a field added beside the declarations fails here, at import)
for _cls in (RetrievalRecord, RankingRecord, ClaimRecord, GenerationRecord, LabelRecord):
    declared(_cls)


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
    return [LabelRecord.from_json(value, where) for where, value in json_line_values(path, LabelError, _LINE_SHAPE)]


#: what each line of a label file must be (the end of a JSON Lines error)
_LINE_SHAPE = "expected one label record per line (a JSON object, as `ragtrace audit --per-trace` writes)"
