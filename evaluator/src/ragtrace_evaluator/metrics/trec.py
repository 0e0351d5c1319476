"""trec_eval-compatible retrieval measures: ``P_k``, ``recall_k``, ``recip_rank``, ``ndcg_cut_k``,
``success_k`` and ``map``, with trec_eval's names and conventions.

Conventions reproduced (they decide ties and ranks, so they decide the numbers):

- A run is re-sorted per query by score descending, then document id descending (byte order);
  the rank column of the run file is ignored.
- Binary measures count a document relevant when its judgement is ``>= relevance_level``
  (trec_eval's ``-l``, default 1); unjudged documents are not relevant.
- ``ndcg_cut_k`` uses graded gains (the judgement value itself, negative values count 0) and a
  ``log2(rank + 1)`` discount; the ideal ordering is built from every judgement of the query.
- ``P_k`` divides by ``k`` even when fewer than ``k`` documents were retrieved.
- A query is evaluated when it appears in both the run and the qrels (``complete=True`` is
  trec_eval's ``-c``: every qrels query counts, missing runs score 0).

Undefined values are never silently 0: a query with no relevant judgement makes recall, map,
ndcg and recip_rank undefined (trec_eval prints 0 for them). Each result carries ``n`` and
``n_undefined`` so the caller can see it; `evaluate` averages them as trec_eval does (as 0)
and reports how many there were.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragtrace_store import not_utf8

#: judgements per query: doc id -> relevance grade
Qrels = Mapping[str, Mapping[str, int]]
#: scores per query: doc id -> retrieval score
Run = Mapping[str, Mapping[str, float]]

DEFAULT_CUTOFFS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
DEFAULT_SUCCESS = (1, 5, 10)
_MEASURE = re.compile(r"^(P|recall|ndcg_cut|success)_(\d+)$|^(recip_rank|map)$")


class TrecFormatError(ValueError):
    """A qrels or run file (or a measure name) does not follow the TREC format."""


def default_measures() -> tuple[str, ...]:
    """The measures `ragtrace metrics` reports by default, in trec_eval's print order."""
    names = ["map", "recip_rank"]
    names += [f"P_{k}" for k in DEFAULT_CUTOFFS]
    names += [f"recall_{k}" for k in DEFAULT_CUTOFFS]
    names += [f"ndcg_cut_{k}" for k in DEFAULT_CUTOFFS]
    names += [f"success_{k}" for k in DEFAULT_SUCCESS]
    return tuple(names)


def parse_measure(name: str) -> tuple[str, int | None]:
    """``"P_5"`` -> ``("P", 5)``; ``"map"`` -> ``("map", None)``. Raises `TrecFormatError`."""
    m = _MEASURE.match(name)
    if not m:
        raise TrecFormatError(
            f"unknown measure {name!r}: use P_k, recall_k, ndcg_cut_k, success_k (k >= 1), recip_rank or map"
        )
    if m.group(3):
        return m.group(3), None
    k = int(m.group(2))
    if k < 1:
        raise TrecFormatError(f"measure {name!r}: the cutoff must be >= 1")
    return m.group(1), k


# --- file formats --------------------------------------------------------------------------------
def parse_qrels(lines: Iterable[str], *, source: str = "qrels") -> dict[str, dict[str, int]]:
    """TREC qrels: ``query_id iteration doc_id relevance`` per line; '#' comments and blank lines skipped."""
    qrels: dict[str, dict[str, int]] = {}
    for lineno, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        parts = text.split()
        if len(parts) != 4:
            raise TrecFormatError(
                f"{source}:{lineno}: expected 4 fields 'query_id iteration doc_id relevance', got {len(parts)}"
            )
        try:
            rel = int(parts[3])
        except ValueError:
            raise TrecFormatError(f"{source}:{lineno}: relevance {parts[3]!r} is not an integer") from None
        qrels.setdefault(parts[0], {})[parts[2]] = rel
    return qrels


def parse_run(lines: Iterable[str], *, source: str = "run") -> dict[str, dict[str, float]]:
    """TREC run: ``query_id Q0 doc_id rank score tag [ignored...]``; the rank column is ignored."""
    run: dict[str, dict[str, float]] = {}
    for lineno, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        parts = text.split()
        if len(parts) < 6:
            raise TrecFormatError(
                f"{source}:{lineno}: expected at least 6 fields 'query_id Q0 doc_id rank score tag', "
                f"got {len(parts)}"
            )
        try:
            score = float(parts[4])
        except ValueError:
            raise TrecFormatError(f"{source}:{lineno}: score {parts[4]!r} is not a number") from None
        docs = run.setdefault(parts[0], {})
        if parts[2] in docs:
            raise TrecFormatError(f"{source}:{lineno}: document {parts[2]!r} appears twice for query {parts[0]!r}")
        docs[parts[2]] = score
    return run


def read_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    with open(path, encoding="utf-8") as fh:
        try:
            return parse_qrels(fh, source=str(path))
        except UnicodeDecodeError as exc:
            raise TrecFormatError(not_utf8(path, exc)) from None


def read_run(path: str | Path) -> dict[str, dict[str, float]]:
    with open(path, encoding="utf-8") as fh:
        try:
            return parse_run(fh, source=str(path))
        except UnicodeDecodeError as exc:
            raise TrecFormatError(not_utf8(path, exc)) from None


def trec_order(scores: Mapping[str, float]) -> list[str]:
    """Document ids in trec_eval's order: score descending, then doc id descending (byte order)."""
    return sorted(scores, key=lambda d: (-scores[d], _Desc(d)))


class _Desc:
    """Sort key that reverses byte-order comparison of a string (trec_eval breaks ties by strcmp desc)."""

    __slots__ = ("b",)

    def __init__(self, s: str) -> None:
        self.b = s.encode("utf-8")

    def __lt__(self, other: _Desc) -> bool:
        return self.b > other.b

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Desc) and self.b == other.b

    def __hash__(self) -> int:
        return hash(self.b)


# --- per-query measures ----------------------------------------------------------------------------
def query_measures(
    ranked: Sequence[str],
    judgements: Mapping[str, int],
    measures: Sequence[str],
    *,
    relevance_level: int = 1,
) -> dict[str, float | None]:
    """Measures of one ranked list (best first) against one query's judgements.

    A value is None when undefined: every measure but ``P_k`` and ``success_k`` needs at least one
    relevant judgement (success_k and P_k are then 0 by definition, as no relevant document exists).
    """
    # an unjudged document is never relevant, whatever the level (at -l 0 it is not a judged 0)
    rel_flags = [d in judgements and judgements[d] >= relevance_level for d in ranked]
    num_rel = sum(1 for v in judgements.values() if v >= relevance_level)
    out: dict[str, float | None] = {}
    for name in measures:
        kind, k = parse_measure(name)
        if kind == "P":
            assert k is not None
            out[name] = sum(rel_flags[:k]) / k
        elif kind == "success":
            out[name] = 1.0 if any(rel_flags[:k]) else 0.0
        elif num_rel == 0:
            out[name] = None
        elif kind == "recall":
            out[name] = sum(rel_flags[:k]) / num_rel
        elif kind == "recip_rank":
            first = next((i for i, r in enumerate(rel_flags) if r), None)
            out[name] = 0.0 if first is None else 1.0 / (first + 1)
        elif kind == "map":
            hits, total = 0, 0.0
            for i, r in enumerate(rel_flags):
                if r:
                    hits += 1
                    total += hits / (i + 1)
            out[name] = total / num_rel
        else:  # ndcg_cut
            assert k is not None
            out[name] = _ndcg_cut(ranked, judgements, k)
    return out


def _ndcg_cut(ranked: Sequence[str], judgements: Mapping[str, int], k: int) -> float | None:
    dcg = sum(max(judgements.get(d, 0), 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted((g for g in judgements.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    if idcg == 0:
        return None
    return dcg / idcg


# --- whole-run evaluation ----------------------------------------------------------------------------
@dataclass(frozen=True)
class MeasureSummary:
    """One measure over the evaluated queries.

    ``mean`` follows trec_eval (undefined per-query values count as 0) over ``n`` queries;
    ``n_undefined`` says how many of them were undefined (no relevant judgement).
    """

    name: str
    mean: float
    n: int
    n_undefined: int


@dataclass(frozen=True)
class TrecResult:
    """Per-query values (None = undefined) and the summaries, keyed by trec_eval measure names."""

    measures: tuple[str, ...]
    per_query: dict[str, dict[str, float | None]]
    summary: dict[str, MeasureSummary]
    #: query ids of the run absent from the qrels (trec_eval ignores them)
    unjudged_queries: tuple[str, ...] = ()
    counts: dict[str, dict[str, int]] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        """``{"per_query": {qid: {measure: value}}, "all": {measure: mean}, ...}`` with trec_eval names.

        Per-query undefined values are written as trec_eval prints them (0.0) in ``per_query``;
        ``undefined`` lists, per measure, how many queries that was.
        """
        per_query = {
            q: {**self.counts.get(q, {}), **{m: (0.0 if v is None else v) for m, v in vals.items()}}
            for q, vals in self.per_query.items()
        }
        totals: dict[str, int] = {}
        for c in self.counts.values():
            for key, val in c.items():
                totals[key] = totals.get(key, 0) + val
        return {
            "per_query": per_query,
            "all": {"num_q": len(self.per_query), **totals, **{m: s.mean for m, s in self.summary.items()}},
            "undefined": {m: s.n_undefined for m, s in self.summary.items() if s.n_undefined},
            "unjudged_queries": list(self.unjudged_queries),
        }


def evaluate(
    qrels: Qrels,
    run: Run,
    measures: Sequence[str] | None = None,
    *,
    relevance_level: int = 1,
    complete: bool = False,
) -> TrecResult:
    """Evaluate a run against qrels the way ``trec_eval [-c] [-l LEVEL]`` does."""
    names = tuple(measures) if measures is not None else default_measures()
    for name in names:
        parse_measure(name)  # validate up front, before any work
    qids = sorted(qrels) if complete else sorted(q for q in run if q in qrels)
    per_query: dict[str, dict[str, float | None]] = {}
    counts: dict[str, dict[str, int]] = {}
    for qid in qids:
        judgements = qrels[qid]
        ranked = trec_order(run.get(qid, {}))
        per_query[qid] = query_measures(ranked, judgements, names, relevance_level=relevance_level)
        rel = {d for d, g in judgements.items() if g >= relevance_level}
        counts[qid] = {
            "num_ret": len(ranked),
            "num_rel": len(rel),
            "num_rel_ret": sum(1 for d in ranked if d in rel),
        }
    summary = {}
    for name in names:
        vals = [per_query[q][name] for q in qids]
        undefined = sum(1 for v in vals if v is None)
        mean = sum(v for v in vals if v is not None) / len(vals) if vals else float("nan")
        summary[name] = MeasureSummary(name, mean, len(vals), undefined)
    unjudged = tuple(sorted(q for q in run if q not in qrels))
    return TrecResult(names, per_query, summary, unjudged, counts)
