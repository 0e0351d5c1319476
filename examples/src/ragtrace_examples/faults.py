"""Release variants that inject known faults at each boundary, recorded per query.

A `Release` is a name plus a fault plan: which golden questions it breaks and how. The baseline has
an empty plan. Each fault breaks exactly one boundary of the pipeline, so the evaluator's label
for the query is known in advance:

================  ==============  ===================================================================
fault             boundary        what the candidate release does
================  ==============  ===================================================================
chunk_split       retrieval       its chunker splits the answering document at the evidence sentence;
                                  the evidence chunk no longer names the entity (later sentences refer
                                  back with "It", "The company"), so lexical retrieval cannot find it
rerank_distractor ranking         its reranker promotes the question's hard distractors (same name
                                  root, same wording, different facts) and pushes the evidence chunk
                                  just below the context cut-off
over_abstain      evidence use    its prompt tells the model to decline unless certain; the answer is
                                  a refusal although the evidence is in the context
alter_facts       faithfulness    its generator rewrites numbers and names of the answer with values
                                  that appear in no supplied passage
================  ==============  ===================================================================

The plan is drawn from the seed, so the same corpus, rates and seed always break the same
queries. The faulty components consult the plan by query id: that is how a fault is *injected*
(targeted, reproducible), as opposed to hoped for. The evaluator never sees the plan — only the
spans — so checking its labels against `injected_faults` is a fair test.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from ragtrace_examples.corpus import Corpus
from ragtrace_store import FailureMode, LabelRecord

__all__ = [
    "DEFAULT_RATES",
    "Fault",
    "InjectedFault",
    "Release",
    "alter_facts",
    "baseline_release",
    "candidate_release",
    "injected_faults",
    "rechunked_release",
]


class Fault(StrEnum):
    CHUNK_SPLIT = "chunk_split"
    RERANK_DISTRACTOR = "rerank_distractor"
    OVER_ABSTAIN = "over_abstain"
    ALTER_FACTS = "alter_facts"

    @property
    def boundary(self) -> str:
        return _BOUNDARY[self]

    @property
    def expected_mode(self) -> str:
        """The failure mode the evaluator should assign (DESIGN.md's precedence)."""
        return _EXPECTED[self]


_BOUNDARY = {Fault.CHUNK_SPLIT: "retrieval", Fault.RERANK_DISTRACTOR: "ranking",
             Fault.OVER_ABSTAIN: "evidence_use", Fault.ALTER_FACTS: "faithfulness"}
_EXPECTED = {Fault.CHUNK_SPLIT: FailureMode.RETRIEVAL_GAP.value,
             Fault.RERANK_DISTRACTOR: FailureMode.RANK_INVERSION.value,
             Fault.OVER_ABSTAIN: FailureMode.UNDER_USE.value, Fault.ALTER_FACTS: FailureMode.FABRICATION.value}

#: share of golden questions each fault breaks in the default candidate release
DEFAULT_RATES: Mapping[Fault, float] = {
    Fault.CHUNK_SPLIT: 0.08, Fault.RERANK_DISTRACTOR: 0.08, Fault.OVER_ABSTAIN: 0.06, Fault.ALTER_FACTS: 0.08,
}

#: what a release answers when it declines
ABSTENTION = "I cannot answer that from the provided documents."


@dataclass(frozen=True)
class Release:
    """A deployable variant of the example pipeline: its name (``service.version``) and fault plan."""

    name: str
    plan: Mapping[str, Fault] = field(default_factory=dict)
    description: str = ""
    #: documents this release's chunker re-cuts without losing anything (doc id -> offset): a benign
    #: chunking change, which renames the chunks that chunk-id gold points at (see `rechunked_release`)
    rechunk: Mapping[str, int] = field(default_factory=dict)

    def fault(self, query_id: str | None) -> Fault | None:
        return self.plan.get(query_id) if query_id else None

    def split_documents(self, corpus: Corpus) -> dict[str, int]:
        """Documents the chunker splits, and where: doc id -> character offset of the evidence sentence."""
        out: dict[str, int] = dict(self.rechunk)
        for q in corpus.questions:
            if self.plan.get(q.id) is Fault.CHUNK_SPLIT:
                out[q.doc_id] = q.evidence_start
        return out


@dataclass(frozen=True)
class InjectedFault:
    """The ground truth of one broken query: what was injected and which label it must get."""

    query_id: str
    release: str
    fault: str
    boundary: str
    expected_mode: str

    def as_json(self) -> dict[str, Any]:
        return {"query_id": self.query_id, "release": self.release, "fault": self.fault,
                "boundary": self.boundary, "expected_mode": self.expected_mode}


def baseline_release(name: str = "v1") -> Release:
    return Release(name=name, description="BM25 → MiniLM hybrid reranker → extractive generator, no faults")


def candidate_release(corpus: Corpus, name: str = "v2", *, rates: Mapping[Fault, float] | None = None,
                      seed: int = 0, recut_index: bool = False) -> Release:
    """A release that breaks a seeded share of the golden questions at each boundary.

    ``rates`` maps each fault to the share of questions it breaks (each question gets at most one
    fault; they must sum to at most 1). Raises ``ValueError`` on a bad rate. ``recut_index``: its
    chunker also re-cuts every other answering document after its evidence (`rechunked_release`
    with share 1), as a real chunker change renames the whole index while only the ``chunk_split``
    documents lose their evidence.
    """
    rates = dict(DEFAULT_RATES if rates is None else rates)
    for fault, rate in rates.items():
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"rate for {fault.value} is {rate}: give a share between 0 and 1")
    if sum(rates.values()) > 1.0 + 1e-9:
        raise ValueError(f"fault rates sum to {sum(rates.values()):.2f}: each query takes one fault, keep it <= 1")
    ids = [q.id for q in corpus.questions]
    random.Random(f"faults:{seed}").shuffle(ids)
    plan: dict[str, Fault] = {}
    at = 0
    for fault in Fault:  # fixed order, so a plan depends only on (questions, rates, seed)
        n = round(rates.get(fault, 0.0) * len(ids))
        for qid in ids[at : at + n]:
            plan[qid] = fault
        at += n
    desc = "faults injected: " + ", ".join(f"{f.value} {rates.get(f, 0.0):.0%}" for f in Fault)
    if recut_index:
        recut = rechunked_release(corpus, name, share=1.0, seed=seed, plan=plan)
        return replace(recut, description=f"{desc}; its chunker also re-cuts the {len(recut.rechunk)} other "
                                          "answering documents after their evidence (renamed, nothing lost)")
    return Release(name=name, plan=plan, description=desc)


def rechunked_release(corpus: Corpus, name: str = "v2", *, share: float = 0.3, seed: int = 0,
                      plan: Mapping[str, Fault] | None = None) -> Release:
    """A release whose chunker re-cuts a seeded ``share`` of the answering documents *after* their
    evidence sentence: the head chunk ``<doc>#0`` still names the entity and holds the evidence, so
    retrieval finds what it found before — but the chunk ids change (``<doc>`` becomes ``<doc>#0``),
    so gold kept as chunk ids of the old build no longer matches. ``plan`` adds injected faults
    (documents a fault splits are not re-cut). Documents whose evidence is their last sentence are
    left alone (nothing to cut after it)."""
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"share {share}: give the share of documents to re-cut, between 0 and 1")
    plan = dict(plan or {})
    faulted = {corpus.question(q).doc_id for q, f in plan.items() if f is Fault.CHUNK_SPLIT}
    eligible = []
    for q in corpus.questions:
        doc = corpus.document(q.doc_id)
        after = [s for s in doc.sentence_starts if s >= q.evidence_end]
        if after and q.doc_id not in faulted:
            eligible.append((q.doc_id, after[0]))
    random.Random(f"rechunk:{seed}").shuffle(eligible)
    cuts = dict(eligible[: round(share * len(eligible))])
    return Release(name=name, plan=plan, rechunk=cuts,
                   description=f"re-chunked {len(cuts)} documents after their evidence; {len(plan)} faults")


def injected_faults(release: Release) -> list[InjectedFault]:
    return [InjectedFault(qid, release.name, f.value, f.boundary, f.expected_mode)
            for qid, f in sorted(release.plan.items())]


def write_faults(path: str | Path, releases: Iterable[Release]) -> Path:
    """The ground truth of every release as JSON Lines (one injected fault per line)."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as fh:
        for rel in releases:
            for f in injected_faults(rel):
                fh.write(json.dumps(f.as_json()) + "\n")
    return out


def check_labels(records: Iterable[LabelRecord | Mapping[str, Any]], releases: Sequence[Release],
                 corpus: Corpus) -> dict[str, Any]:
    """How well the evaluator's per-trace labels recover the injected faults.

    ``records`` are per-trace label records (`ragtrace_store.LabelRecord`s, or objects of the audit's
    ``--per-trace`` shape with at least ``release``, ``query_id`` and ``failure_mode``). For each fault,
    the share of its queries labelled with the expected failure mode; for the queries no fault
    touched (every query of a clean release included), the share labelled ``ok``. Queries with
    no record are counted as ``missing`` rather than as misses or hits.
    """
    by_key: dict[tuple[str, str], str] = {}  # (release, query id) -> failure mode
    for item in records:
        if isinstance(item, LabelRecord):
            by_key[(item.release, item.query_id)] = item.failure_mode.value
        else:
            by_key[(str(item.get("release")), str(item.get("query_id")))] = str(item.get("failure_mode"))
    bucket: dict[str, Any]
    modes: dict[Fault, dict[str, Any]] = {f: {"n": 0, "hits": 0, "missing": 0, "confusions": {}} for f in Fault}
    clean: dict[str, Any] = {"n": 0, "hits": 0, "missing": 0, "confusions": {}}
    for rel in releases:
        for q in corpus.questions:
            fault = rel.plan.get(q.id)
            bucket = modes[fault] if fault is not None else clean
            expected = fault.expected_mode if fault is not None else FailureMode.OK.value
            got = by_key.get((rel.name, q.id))
            if got is None:
                bucket["missing"] += 1
                continue
            bucket["n"] += 1
            if got == expected:
                bucket["hits"] += 1
            else:
                bucket["confusions"][got] = bucket["confusions"].get(got, 0) + 1

    def share(b: dict[str, Any]) -> float | None:
        return b["hits"] / b["n"] if b["n"] else None

    return {
        "modes": [{"fault": f.value, "boundary": f.boundary, "expected_mode": f.expected_mode, **b,
                   "share": share(b)} for f, b in modes.items()],
        "clean": {**clean, "share": share(clean)},
    }


# --- the faulty components ----------------------------------------------------------------------
def promote_distractors(ranked: Sequence[str], *, gold: Iterable[str], distractor_docs: Iterable[str],
                        top_k: int, doc_of: Mapping[str, str] | None = None) -> list[str]:
    """The faulty reranker's order: hard distractors first, other non-gold next, gold just below top_k.

    ``ranked`` are chunk ids in the honest order; ``doc_of`` maps a chunk id to its document id
    (identity when absent). The gold lands at rank ``top_k`` when the pool is large enough to
    fill the context with non-gold chunks, else last.
    """
    gold_set = set(gold)
    hard = set(distractor_docs)
    mapping: Mapping[str, str] = doc_of or {}

    def doc(chunk_id: str) -> str:
        return mapping.get(chunk_id, chunk_id)

    golds = [c for c in ranked if c in gold_set]
    promoted = [c for c in ranked if c not in gold_set and doc(c) in hard]
    rest = [c for c in ranked if c not in gold_set and doc(c) not in hard]
    others = promoted + rest
    return others[:top_k] + golds + others[top_k:]


_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
_NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]{2,}(?:\s[A-Z][a-z]{2,})*")
# The generic word of a proper name ("the Okonkwo Prize", "Hepround Energy"): alter the other word.
_GENERIC = frozenset({
    "Prize", "Award", "Institute", "University", "River", "Street", "Harbour", "Bridge", "Vale", "Crossing",
    "Dynamics", "Logistics", "Biolabs", "Textiles", "Foods", "Mining", "Robotics", "Shipping", "Optics",
    "Ceramics", "Energy", "Pharma", "Company", "Group",
})
_SYLLABLES = ["bra", "dun", "kel", "mor", "ste", "vin", "tal", "rou", "gha", "pel", "zor", "wyn"]


def alter_facts(answer: str, passages: Sequence[str], *, seed: int | str = 0) -> str:
    """Rewrite the numbers and names of ``answer`` with values found in none of ``passages``.

    Numbers keep their shape (a year stays a plausible year, thousands separators stay); names
    (capitalised words after the first word of a sentence) get a fresh synthetic word. An answer
    with neither gets a fabricated clause with a number, so the result always asserts something
    that no passage supports.
    """
    r = random.Random(f"alter:{seed}:{answer}")
    haystack = " ".join(passages)

    def new_number(m: re.Match[str]) -> str:
        raw = m.group(0)
        digits = raw.replace(",", "")
        value = float(digits) if "." in digits else int(digits)
        for _ in range(200):
            if isinstance(value, int) and 1000 <= value <= 2100 and "," not in raw:
                cand = str(value + r.choice([-1, 1]) * r.randint(3, 40))  # a year: stay a year
            else:
                factor = r.choice([0.4, 0.55, 0.7, 1.35, 1.6, 2.2])
                num = max(1, round(float(value) * factor))
                cand = f"{num:,}" if "," in raw or num >= 10000 else str(num)
            if cand != raw and cand not in haystack:
                return cand
        return raw + "7"

    def new_name(m: re.Match[str]) -> str:
        words = m.group(0).split()
        for _ in range(200):
            word = "".join(r.choice(_SYLLABLES) for _ in range(2)).capitalize()
            if word not in haystack:
                at = len(words) - 1
                while at > 0 and words[at] in _GENERIC:
                    at -= 1
                words[at] = word
                return " ".join(words)
        return m.group(0) + "son"

    changed = _NUMBER.sub(new_number, answer)
    changed = _NAME.sub(new_name, changed)
    if changed == answer:
        changed = answer.rstrip(". ") + f", as confirmed by {r.randint(12, 97)} independent surveys."
    return changed
