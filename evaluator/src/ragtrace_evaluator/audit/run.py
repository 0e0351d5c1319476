"""`run_audit`: label sampled traces with their failing boundary and write the labels back.

One audit: resolve the labellers and the manifest -> list candidate traces (filters) -> sample
deterministically (and shard) -> skip traces already labelled under this manifest (resumable) ->
for the rest, in batches: assemble the trace, decide gold (span > qrels > relevance labeller),
judge the answer against the supplied context, label every boundary (`failure_modes`) -> write
``labels`` rows (+ JSON Lines) -> summarise every sampled trace, resumed ones included.

Collaborators are parameters: pass ``grounding=`` / ``relevance=`` labeller objects to inject
them, otherwise ``labeller=`` / ``relevance_labeller=`` names go through the factories.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from ragtrace_evaluator.audit.evidence import POLICY as EVIDENCE_POLICY
from ragtrace_evaluator.audit.evidence import resolve as resolve_spans
from ragtrace_evaluator.audit.failure_modes import Evidence, label_trace
from ragtrace_evaluator.audit.sampling import parse_shard, stratify_arg
from ragtrace_evaluator.audit.summary import summarise
from ragtrace_evaluator.labellers.protocol import GroundingLabeller, GroundingResult, Passage, RelevanceLabeller
from ragtrace_evaluator.labellers.registry import (
    GROUNDING_NAMES,
    RELEVANCE_NAMES,
    is_registered,
    make_grounding_labeller,
    make_relevance_labeller,
)
from ragtrace_evaluator.manifest import build_manifest, store_manifest
from ragtrace_store import (
    SAMPLER_VERSION,
    SAMPLERS,
    GoldSource,
    GoldSpan,
    LabelRecord,
    SamplePlan,
    TraceFilter,
    TraceRecord,
    as_utc,
    parse_time_bound,
    read_gold_spans,
    read_labels,
    sample_traces,
    write_label_lines,
    write_labels,
)
from ragtrace_store import label_row as store_label_row
from ragtrace_store.gold_judgements import traces_with_own_gold

STAGES = ("retrieval", "all")


class AuditError(ValueError):
    """An audit cannot run as asked; the message says what to change."""


# --- option parsing (shared with the CLI and POST /api/audit) -----------------------------------------
def parse_time(value: datetime | str | None, name: str) -> datetime | None:
    """``--since``/``--until`` as an aware UTC time: a datetime (naive means UTC), an ISO time or an age
    (``-1h``, ``7d``)."""
    if isinstance(value, datetime):
        return as_utc(value)
    try:
        return parse_time_bound(value, name)
    except ValueError as exc:
        raise AuditError(str(exc)) from None


def check_labeller_name(name: str) -> None:
    """Refuse (`AuditError`) a labeller name no audit could build, without building it: a kind the
    registry does not know, or a ``py:`` name not shaped MODULE:FUNCTION. A known kind's argument
    (a model directory, a URL) is only checked when the labeller is built."""
    if name.startswith("py:"):
        module_name, _, func = name[3:].partition(":")
        if not module_name or not func:
            raise AuditError(f"labeller {name!r}: use py:MODULE:FUNCTION, e.g. py:mypkg.labellers:make")
    elif not is_registered(name):
        raise AuditError(f"unknown labeller {name!r}; grounding: {GROUNDING_NAMES}; relevance: {RELEVANCE_NAMES}; "
                         "or py:MODULE:FUNCTION")


def _factory(make: Callable[[str], Any], name: str, protocol: type) -> Any:
    """Build a labeller by name. ``py:MODULE:FUNCTION`` calls any importable factory (plug-ins, for
    the local CLI; `POST /api/audit` accepts only the names its server enables); other names go to
    the registry (`ragtrace_evaluator.labellers.registry`). What a factory returns must satisfy
    ``protocol`` (`GroundingLabeller` or `RelevanceLabeller`), or the audit stops before labelling."""
    if name.startswith("py:"):
        check_labeller_name(name)
        module_name, _, func = name[3:].partition(":")
        try:
            factory = getattr(importlib.import_module(module_name), func)
        except (ImportError, AttributeError) as exc:
            raise AuditError(f"labeller {name!r}: cannot load {module_name}:{func} ({exc})") from exc
        result = factory("")
    else:
        try:
            result = make(name)
        except ValueError as exc:  # an unknown name: the registry's message lists the known ones
            raise AuditError(f"--labeller/--relevance-labeller {name!r}: {exc}") from exc
    if not isinstance(result, protocol):
        raise AuditError(f"labeller {name!r}: its factory returned {type(result).__name__}, which is not a "
                         f"{protocol.__name__} (see ragtrace_evaluator.labellers.protocol for the methods it needs)")
    return result


def resolve_labellers(*, stages: str, labeller: str, relevance_labeller: str | None,
                      grounding: GroundingLabeller | None, relevance: RelevanceLabeller | None,
                      ) -> tuple[GroundingLabeller | None, RelevanceLabeller | None]:
    if stages not in STAGES:
        raise AuditError(f"--stages {stages!r}: use 'retrieval' or 'all'")
    if stages == "all" and grounding is None:
        grounding = _factory(make_grounding_labeller, labeller, GroundingLabeller)
    if stages == "retrieval":
        grounding = None
    if relevance is None and relevance_labeller is not None and relevance_labeller != "none":
        relevance = _factory(make_relevance_labeller, relevance_labeller, RelevanceLabeller)
    return grounding, relevance


# --- store access ------------------------------------------------------------------------------------
def labelled_records(store: Any, tenant: str, manifest_id: str, trace_ids: Sequence[str]) -> dict[str, LabelRecord]:
    """Per-trace records already stored under this manifest (for resumption and the summary)."""
    return {r.trace_id: r for r in read_labels(store, tenant=tenant, manifest_id=manifest_id, trace_ids=trace_ids)}


def gold_sources(store: Any, tenant: str, records: Sequence[Any]) -> dict[str, GoldSource]:
    """'span' when a trace's gold is keyed by its trace id, 'qrels' when by its query id.

    Mirrors `Store.read_traces`, which prefers trace-keyed gold over query-keyed gold.
    """
    ids = [r.trace_id for r in records if r.gold_ids]
    by_trace = traces_with_own_gold(store, tenant=tenant, trace_ids=ids)
    return {t: (GoldSource.SPAN if t in by_trace else GoldSource.QRELS) for t in ids}


def label_row(rec: LabelRecord | Mapping[str, Any], *, tenant: str, trace_time: datetime) -> tuple[Any, ...]:
    """The ``labels`` row of one record, also given as its JSON object (`ragtrace_store.label_row`)."""
    record = rec if isinstance(rec, LabelRecord) else LabelRecord.from_json(rec)
    return store_label_row(record, tenant=tenant, trace_time=trace_time)


# --- labelling ---------------------------------------------------------------------------------------
#: the last step of the manifest's gold policy when a relevance labeller stands in for gold
_LABELLER_POLICY = ">labeller(reference=the reference answer, else none or the production answer if required)"


def _passages(docs: Sequence[Any]) -> list[Passage]:
    return [Passage(d.id, d.content or "") for d in docs]


def _unique(ids: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(ids))


def evidence_for(rec: Any, source: GoldSource | None, relevance: RelevanceLabeller | None,
                 spans: Sequence[GoldSpan] = ()) -> Evidence:
    """Pool, final order, context and gold of one assembled trace; gold from the labeller if none stored.

    Gold, in order: ids on the trace's own spans; evidence ``spans`` of its query id resolved to the
    chunks it saw (`ragtrace_evaluator.audit.evidence`: they survive a re-chunking, chunk-id qrels do
    not); chunk-id qrels; the relevance labeller.
    """
    pool_docs = {d.id: d for d in (*rec.retrieved, *rec.reranked, *rec.context)}
    ranked = rec.reranked or rec.retrieved or rec.context
    pool = _unique([d.id for d in (*rec.retrieved, *rec.reranked, *rec.context)])
    ctx = tuple(d.id for d in rec.context)
    ranked_ids = _unique([d.id for d in ranked])
    if spans and not (rec.gold_ids and source is GoldSource.SPAN):
        resolved = resolve_spans(spans, (*rec.retrieved, *rec.reranked, *rec.context))
        if resolved is not None:
            return Evidence(pool, ranked_ids, ctx, resolved.gold, GoldSource.EVIDENCE)
    if rec.gold_ids:
        return Evidence(pool, ranked_ids, ctx, frozenset(rec.gold_ids), source or GoldSource.SPAN)
    if relevance is None:
        return Evidence(pool, ranked_ids, ctx, None, GoldSource.NONE)
    with_text = [d for d in pool_docs.values() if d.content]
    if not with_text or not rec.query:
        # Hash-only content cannot be judged: relevance stays unknown rather than guessed.
        return Evidence(pool, ranked_ids, ctx, None, GoldSource.NONE)
    # An imported reference answer goes to the labeller when the query has one: per question, the
    # offline labeller's hit@5 tracks the answer's e2e F1 with rho +0.34 [+0.27, +0.40] given it
    # and +0.04 [-0.03, +0.12] from the query alone (docs/relevance-correlation.md, 182 HotpotQA
    # questions), and eRAG then scores against the gold answer, as its paper does.
    try:
        scores = relevance.relevance(rec.query, _passages(with_text), reference=rec.reference or None)
    except ValueError:
        # Reference-based labellers (eRAG, NLI) need an answer to score documents against; with no
        # reference answer stored, the production answer stands in (the eRAG definition).
        if not rec.answer:
            return Evidence(pool, ranked_ids, ctx, None, GoldSource.NONE)
        scores = relevance.relevance(rec.query, _passages(with_text), reference=rec.answer)
    t = relevance.threshold
    gold = frozenset(d.id for d, s in zip(with_text, scores, strict=True) if s >= t)
    # Confidence: how far the scores sit from the threshold, scaled to [0.5, 1].
    span = max(t, 1.0 - t) or 1.0
    margin = sum(min(abs(s - t) / span, 1.0) for s in scores) / len(scores)
    return Evidence(pool, ranked_ids, ctx, gold, GoldSource.LABELLER, 0.5 + 0.5 * margin)


def label_batch(records: Sequence[Any], *, grounding: GroundingLabeller | None,
                relevance: RelevanceLabeller | None, sources: dict[str, GoldSource],
                manifest_id: str, spans: Mapping[str, Sequence[GoldSpan]] | None = None) -> list[LabelRecord]:
    """Per-trace label records of one batch (grounding is batched across traces); ``spans`` are the
    evidence-span gold by query id (`ragtrace_store.read_gold_spans`)."""
    spans = spans or {}
    # An incomplete trace (lost attributes or a stage) is not labelled at all: its own outcome,
    # with its reasons, never a failure mode read off a pool or context that may be wrong.
    evidence = [evidence_for(r, sources.get(r.trace_id), relevance, spans.get(r.query_id, ())) if r.complete
                else None for r in records]
    judged: list[GroundingResult | None] = [None] * len(records)
    if grounding is not None:
        todo = [i for i, r in enumerate(records) if r.answer is not None and r.complete]
        results = grounding.judge_many([(records[i].answer, _passages(records[i].context)) for i in todo])
        for i, res in zip(todo, results, strict=True):
            judged[i] = res
    out = []
    for rec, ev, gen in zip(records, evidence, judged, strict=True):
        if ev is None:
            out.append(LabelRecord.incomplete(
                trace_id=rec.trace_id, query_id=rec.query_id, release=rec.release, service=rec.service,
                manifest_id=manifest_id, reasons=rec.incomplete_reasons, n_gold=len(rec.gold_ids),
                gold_source=sources.get(rec.trace_id, GoldSource.NONE)))
            continue
        lab = label_trace(ev, gen, answer=rec.answer, reference=rec.reference)
        out.append(lab.to_record(trace_id=rec.trace_id, query_id=rec.query_id, release=rec.release,
                                 service=rec.service, manifest_id=manifest_id))
    return out


def _progress(total: int, enabled: bool) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, disable=not enabled, unit="trace", desc="ragtrace audit", leave=False)


def _batches(ids: Sequence[str], size: int) -> Iterator[list[str]]:
    for i in range(0, len(ids), size):
        yield list(ids[i : i + size])


def run_audit(
    store: Any,
    *,
    tenant: str = "default",
    service: str | None = None,
    release: str | None = None,
    since: datetime | str | None = None,
    until: datetime | str | None = None,
    sample: int | None = None,
    rate: float | None = None,
    stratify: str | Sequence[str] | None = None,
    stages: str = "all",
    labeller: str = "offline",
    relevance_labeller: str | None = "offline",
    shard: str | tuple[int, int] | None = None,
    per_trace: str | Path | IO[str] | None = None,
    progress: bool = False,
    resume: bool = True,
    batch_size: int = 32,
    grounding: GroundingLabeller | None = None,
    relevance: RelevanceLabeller | None = None,
    return_records: bool = False,
    sampler: int = SAMPLER_VERSION,
    on_labels: Callable[[Sequence[LabelRecord], Sequence[TraceRecord]], None] | None = None,
) -> dict[str, Any]:
    """Audit the sampled traces; returns the JSON summary report (see `ragtrace_evaluator.audit.summary.summarise`).

    ``per_trace`` (a path or an open text file) receives one JSON line per sampled trace, resumed
    ones included. ``resume=False`` relabels traces already labelled under the same manifest.
    ``return_records=True`` adds them to the report under ``records`` (for `ragtrace audit --server`).
    ``sampler`` is the sampler version (`ragtrace_store.SAMPLERS`; 1 reproduces the
    sample of a manifest that names no sampler). ``on_labels`` is called after each batch of labels
    is written, with those labels and the trace records they were made from (`ragtrace serve
    --export-labels` sends them on); it runs on the audit's thread, so it must not wait.
    """
    started = time.perf_counter()
    since_dt, until_dt = parse_time(since, "since"), parse_time(until, "until")
    if since_dt is not None and until_dt is not None and since_dt >= until_dt:
        raise AuditError(f"--since {since_dt.isoformat()} is not before --until {until_dt.isoformat()}: no trace "
                         "can match; swap them (an age such as 2d means that long ago)")
    strata = stratify_arg(stratify) if isinstance(stratify, str | None) else tuple(stratify)
    try:
        shard_t = parse_shard(shard) if isinstance(shard, str) else (tuple(shard) if shard else None)
        plan = SamplePlan(sample=sample, rate=rate, stratify=strata, shard=shard_t,  # type: ignore[arg-type]
                          sampler=sampler)
    except ValueError as exc:
        raise AuditError(str(exc)) from None
    if batch_size < 1:
        raise AuditError(f"batch_size {batch_size}: must be >= 1")
    grounding, relevance = resolve_labellers(stages=stages, labeller=labeller,
                                             relevance_labeller=relevance_labeller,
                                             grounding=grounding, relevance=relevance)
    try:
        manifest = build_manifest(
            grounding=grounding.manifest() if grounding is not None else None,
            relevance=relevance.manifest() | {"threshold": relevance.threshold} if relevance is not None else None,
            stages=stages,
            sampler=SAMPLERS[plan.sampler].manifest(),
            gold_policy=f"span>{EVIDENCE_POLICY}>qrels" + (_LABELLER_POLICY if relevance is not None else ""),
        )
    except RuntimeError as exc:
        # a labeller loads its model for its manifest; its load errors (NLIError, ReaderError,
        # LLMJudgeError, EmbedderError) are RuntimeErrors whose message names what to pass instead
        raise AuditError(f"--labeller/--relevance-labeller: {exc}") from None
    mid = store_manifest(store, manifest)

    # the engine chooses; only the chosen ids come back
    picked = sample_traces(store, TraceFilter(tenant=tenant, service=service, release=release, since=since_dt,
                                              until=until_dt), plan)
    chosen = picked.trace_ids
    done = labelled_records(store, tenant, mid, chosen) if resume else {}
    todo = [t for t in chosen if t not in done]
    new: dict[str, LabelRecord] = {}
    label_seconds = 0.0
    with ExitStack() as stack:
        bar = stack.enter_context(_progress(len(chosen), progress))
        bar.update(len(done))
        for ids in _batches(todo, batch_size):
            t0 = time.perf_counter()
            records = list(store.read_traces(tenant=tenant, trace_ids=ids, with_content=True))
            sources = gold_sources(store, tenant, records)
            spans = read_gold_spans(store, tenant=tenant, query_ids=[r.query_id for r in records])
            out = label_batch(records, grounding=grounding, relevance=relevance, sources=sources, spans=spans,
                              manifest_id=mid)
            write_labels(store, out, tenant=tenant, trace_times={r.trace_id: r.start_time for r in records})
            if on_labels is not None:
                on_labels(out, records)
            new.update({o.trace_id: o for o in out})
            label_seconds += time.perf_counter() - t0
            bar.update(len(ids))
    all_records = [new.get(t) or done[t] for t in chosen if t in new or t in done]
    if per_trace is not None:
        write_label_lines(per_trace, all_records)
    as_json = [r.to_json() for r in all_records]
    report = summarise(as_json, manifest=manifest, manifest_id=mid)
    # what the labeller's benchmark measured at its review threshold (dev sets), beside the audit's shares
    measured = getattr(grounding, "selective_record", None)
    if callable(measured) and report["selective"]["review_threshold"] is not None:
        report["selective"]["measured"] = measured()
    report["sampling"] = {
        # root rows matching the filters: traces, plus any second root row not yet merged away
        "n_candidates": picked.candidate_rows, "n_sampled": len(chosen), "n_labelled_now": len(new),
        "n_resumed": len(done), "n_missing": len(chosen) - len(all_records), "sample": sample, "rate": rate,
        "stratify": list(strata), "shard": f"{shard_t[0]}/{shard_t[1]}" if shard_t else None,
        "sampler": plan.sampler, "rounds": picked.rounds,
    }
    report["filters"] = {"tenant": tenant, "service": service, "release": release,
                         "since": since_dt.isoformat() if since_dt else None,
                         "until": until_dt.isoformat() if until_dt else None, "stages": stages}
    if return_records:
        report["records"] = as_json
    elapsed = time.perf_counter() - started
    report["timing"] = {"seconds": round(elapsed, 3), "label_seconds": round(label_seconds, 3),
                        "traces_per_second": round(len(new) / label_seconds, 2) if new and label_seconds else None}
    return report

