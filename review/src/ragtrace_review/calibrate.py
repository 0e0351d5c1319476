"""A queue's calibration record: reviewer agreement, labeller vs reviewer majority, and gold export.

Everything here reads decisions and turns them into numbers or files; it never changes a labeller.
Reviewed data may suggest new thresholds, but adopting them is an explicit new labeller manifest,
so past labels stay reproducible.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ragtrace_review.agreement import (
    Calibration,
    KappaResult,
    Proportion,
    calibration,
    cohen_kappa,
    fleiss_kappa,
    majority,
)
from ragtrace_review.queues import (
    Decision,
    list_decisions,
    list_items,
    reviewers_per_item,
)
from ragtrace_store import CLAIM_VERDICTS, FAILURE_MODES, Store
from ragtrace_store.gold_judgements import GoldJudgement, add_gold_judgements


def _first_m(groups: dict[Any, list[tuple[datetime, str, str]]], m: int) -> list[list[str]]:
    """The first m ratings (by time) of every unit rated at least m times."""
    out = []
    for ratings in groups.values():
        if len(ratings) >= m:
            out.append([r[2] for r in sorted(ratings)[:m]])
    return out


def _inter_rater(groups: dict[Any, list[tuple[datetime, str, str]]], k: int, seed: int) -> dict[str, Any]:
    m = max(2, k)
    rows = _first_m(groups, m)
    # With m = 2, rater 1 / rater 2 = the first / second reviewer of each item: reviewers rotate
    # across items, so Cohen's κ here treats "a first and a second opinion" as the two raters.
    res = cohen_kappa([r[0] for r in rows], [r[1] for r in rows]) if m == 2 else fleiss_kappa(rows, seed=seed)
    out = _kappa_json(res)
    if m == 2 and rows:
        out["fleiss"] = _kappa_json(fleiss_kappa(rows, seed=seed))
    return out


def _kappa_json(k: KappaResult) -> dict[str, Any]:
    d = asdict(k)
    d["ci"] = [k.ci.low, k.ci.high] if k.ci else None
    d["level"] = k.ci.level if k.ci else None
    return d


def _prop_json(p: Proportion) -> dict[str, Any]:
    return {"value": p.value, "ci": [p.ci.low, p.ci.high] if p.ci else None, "k": p.k, "n": p.n}


def _calibration_json(c: Calibration) -> dict[str, Any]:
    return {
        "n": c.n, "no_majority": c.no_majority, "accuracy": _prop_json(c.accuracy),
        "categories": list(c.categories), "confusion": c.confusion,
        "per_mode": [{"mode": s.mode, "precision": _prop_json(s.precision), "recall": _prop_json(s.recall)}
                     for s in c.per_mode],
    }


def agreement_report(store: Store, *, tenant: str, queue: str, seed: int = 0) -> dict[str, Any]:
    """The JSON calibration record of one queue (see `ragtrace review agreement --json`)."""
    k = reviewers_per_item(store, tenant=tenant, queue=queue)
    decisions = list_decisions(store, tenant=tenant, queue=queue)
    return summarise(decisions, k=k, queue=queue, tenant=tenant, n_items=len(list_items(store, tenant=tenant,
                                                                                         queue=queue)), seed=seed)


def summarise(decisions: Sequence[Decision], *, k: int, queue: str, tenant: str, n_items: int,
              seed: int = 0) -> dict[str, Any]:
    modes: dict[str, list[tuple[datetime, str, str]]] = defaultdict(list)
    claims: dict[tuple[str, int], list[tuple[datetime, str, str]]] = defaultdict(list)
    by_manifest: dict[str, dict[str, tuple[str, list[str]]]] = defaultdict(dict)
    claim_pairs: dict[str, dict[tuple[str, int], tuple[str, list[str]]]] = defaultdict(dict)
    for d in decisions:
        modes[d.trace_id].append((d.decided_at, d.reviewer_id, d.failure_mode))
        by_manifest[d.manifest_id].setdefault(d.trace_id, (d.labeller_failure_mode, []))[1].append(d.failure_mode)
        for c in d.claims:
            key = (d.trace_id, int(c["index"]))
            claims[key].append((d.decided_at, d.reviewer_id, str(c["verdict"])))
            claim_pairs[d.manifest_id].setdefault(key, (str(c["labeller_verdict"]), []))[1].append(str(c["verdict"]))
    labeller = {}
    # Labels from different manifests are never pooled: one calibration record per manifest.
    for manifest_id in sorted(by_manifest):
        labeller[manifest_id] = {
            "failure_mode": _calibration_json(calibration(list(by_manifest[manifest_id].values()), FAILURE_MODES)),
            "claims": _calibration_json(calibration(list(claim_pairs[manifest_id].values()), CLAIM_VERDICTS)),
        }
    return {
        "queue": queue, "tenant": tenant, "reviewers_per_item": k, "items": n_items,
        "reviewed_items": len(modes), "decisions": len(decisions),
        "reviewers": sorted({d.reviewer_name for d in decisions}),
        "inter_reviewer": {"failure_mode": _inter_rater(modes, k, seed), "claims": _inter_rater(claims, k, seed)},
        "labeller": labeller,
    }


def _fmt(x: float | None, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def _fmt_prop(p: dict[str, Any]) -> str:
    if p["value"] is None:
        return "n/a (n=0)"
    lo, hi = p["ci"]
    return f"{p['value']:.2f} [{lo:.2f}, {hi:.2f}] ({p['k']}/{p['n']})"


def render_text(report: dict[str, Any]) -> str:
    """The terminal form of `agreement_report`."""
    lines = [
        f"queue {report['queue']} (tenant {report['tenant']}): {report['reviewed_items']} of {report['items']} items "
        f"reviewed, {report['decisions']} decisions by {len(report['reviewers'])} reviewers, "
        f"K={report['reviewers_per_item']}",
        "",
        "inter-reviewer agreement",
    ]
    for what, k in report["inter_reviewer"].items():
        name = "Cohen's kappa" if k["method"] == "cohen" else f"Fleiss' kappa (m={k['raters_per_item']})"
        if k["kappa"] is None:
            lines.append(f"  {what:<13} {name}: undefined, {k['reason']} (n={k['n']})")
            continue
        ci = f" [{k['ci'][0]:.3f}, {k['ci'][1]:.3f}] {int(k['level'] * 100)}% CI" if k["ci"] else ""
        lines.append(f"  {what:<13} {name} = {k['kappa']:.3f}{ci}, observed agreement "
                     f"{_fmt(k['observed'])}, chance {_fmt(k['expected'])}, n={k['n']}")
        if "fleiss" in k and k["fleiss"]["kappa"] is not None:
            f = k["fleiss"]
            fci = f" [{f['ci'][0]:.3f}, {f['ci'][1]:.3f}]" if f["ci"] else ""
            lines.append(f"  {'':<13} Fleiss' kappa = {f['kappa']:.3f}{fci}")
    for manifest_id, parts in report["labeller"].items():
        cal = parts["failure_mode"]
        lines += ["", f"labeller (manifest {manifest_id}) vs reviewer majority: n={cal['n']}, "
                      f"no majority={cal['no_majority']}, accuracy {_fmt_prop(cal['accuracy'])}"]
        cats = cal["categories"]
        width = max(len(c) for c in cats) + 2
        lines.append("  labeller \\ reviewers".ljust(width + 2) + "".join(c[:14].rjust(16) for c in cats))
        for a in cats:
            lines.append(f"  {a:<{width}}" + "".join(str(cal["confusion"][a][b]).rjust(16) for b in cats))
        lines.append(f"  {'mode':<{width}}{'precision [95% CI] (k/n)':>34}{'recall [95% CI] (k/n)':>34}")
        for s in cal["per_mode"]:
            lines.append(f"  {s['mode']:<{width}}{_fmt_prop(s['precision']):>34}{_fmt_prop(s['recall']):>34}")
        cl = parts["claims"]
        lines.append(f"  claims: labeller verdict matches reviewer majority {_fmt_prop(cl['accuracy'])}")
    return "\n".join(lines)


# --- export -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class GoldExport:
    """Reviewed items as gold data: one JSON record per item and TREC qrels lines (ties left out)."""

    records: tuple[dict[str, Any], ...]
    qrels: tuple[tuple[str, str, int], ...]  # (topic = query id or trace id, doc id, relevance)
    #: topics that are trace ids (the trace had no query id), so the store row is keyed by trace
    trace_topics: frozenset[str]


def build_gold(store: Store, *, tenant: str, queue: str) -> GoldExport:
    """Each value is the reviewers' strict majority; a tie is null in the records and no qrels line."""
    items = {it.trace_id: it for it in list_items(store, tenant=tenant, queue=queue)}
    by_item: dict[str, list[Decision]] = defaultdict(list)
    for d in list_decisions(store, tenant=tenant, queue=queue):
        by_item[d.trace_id].append(d)
    qrels: dict[tuple[str, str], list[bool]] = defaultdict(list)
    trace_topics: set[str] = set()
    records = []
    for trace_id in sorted(by_item):
        ds = by_item[trace_id]
        item = items.get(trace_id)
        query_id = item.query_id if item else ""
        claim_votes: dict[int, list[str]] = defaultdict(list)
        claim_text: dict[int, tuple[str, str]] = {}
        rel_votes: dict[str, list[bool]] = defaultdict(list)
        for d in ds:
            for c in d.claims:
                claim_votes[int(c["index"])].append(str(c["verdict"]))
                claim_text[int(c["index"])] = (str(c["claim"]), str(c["labeller_verdict"]))
            for r in d.relevance:
                rel_votes[str(r["doc_id"])].append(bool(r["relevant"]))
        topic = query_id or trace_id
        if not query_id:
            trace_topics.add(trace_id)
        relevance = []
        for doc_id, vs in sorted(rel_votes.items()):
            relevance.append({"doc_id": doc_id, "relevant": majority(vs), "votes": [sum(vs), len(vs) - sum(vs)]})
            qrels[(topic, doc_id)].extend(vs)
        records.append({
            "trace_id": trace_id, "query_id": query_id, "queue": queue, "tenant": tenant,
            "manifest_id": ds[0].manifest_id, "labeller_failure_mode": ds[0].labeller_failure_mode,
            "failure_mode": majority([d.failure_mode for d in ds]), "votes": dict(Counter(d.failure_mode for d in ds)),
            "claims": [{"index": i, "claim": claim_text[i][0], "labeller_verdict": claim_text[i][1],
                        "verdict": majority(claim_votes[i]), "votes": dict(Counter(claim_votes[i]))}
                       for i in sorted(claim_votes)],
            "relevance": relevance,
            "notes": [{"reviewer": d.reviewer_name, "note": d.note} for d in ds if d.note],
            "reviewers": [d.reviewer_name for d in ds],
            "reviewed_at": max(d.decided_at for d in ds).isoformat(),
        })
    lines = []
    for (topic, doc_id), vs in sorted(qrels.items()):
        maj = majority(vs)
        if maj is not None:
            lines.append((topic, doc_id, int(bool(maj))))
    return GoldExport(tuple(records), tuple(lines), frozenset(trace_topics))


def store_gold(store: Store, tenant: str, gold: GoldExport) -> int:
    """Add the relevance judgements to the `gold` table (source 'review') for the next audit."""
    return add_gold_judgements(store, (GoldJudgement("" if topic in gold.trace_topics else topic,
                                                     topic if topic in gold.trace_topics else "", doc_id, rel)
                                       for topic, doc_id, rel in gold.qrels), tenant=tenant, source="review")


def write_gold(records: Sequence[dict[str, Any]], qrels: Sequence[Sequence[Any]], out_dir: Path) -> None:
    """``reviews.jsonl`` and ``qrels.txt`` (TREC: ``topic 0 doc relevance``) in ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with (out_dir / "reviews.jsonl").open("w", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps(rec, sort_keys=True) + "\n")
    with (out_dir / "qrels.txt").open("w", encoding="utf-8") as fh:
        for topic, doc_id, rel in qrels:
            fh.write(f"{topic} 0 {doc_id} {int(rel)}\n")


def export_gold(store: Store, *, tenant: str, queue: str, out_dir: Path, to_store: bool = False) -> dict[str, Any]:
    """Write the reviewed items as gold data (see `build_gold`); ``to_store`` also stores the
    relevance majority as gold rows (source 'review'). Returns counts."""
    reviewers_per_item(store, tenant=tenant, queue=queue)  # a queue that does not exist is an error, not 0 items
    gold = build_gold(store, tenant=tenant, queue=queue)
    write_gold(gold.records, gold.qrels, out_dir)
    stored = store_gold(store, tenant, gold) if to_store else 0
    return {"items": len(gold.records), "qrels": len(gold.qrels), "out": str(out_dir), "stored": stored}
