"""Periodic audits' windows, drift and metrics against the real engine (embedded chDB).

The story the issue asks for: fabrication climbs one point per window (10 % -> 17 %). Every step is
inside the noise against the previous window, so that comparison never calls it; against the anchor
(the release the team signed off at 10 %) it becomes significant and stays so."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ragtrace_collector.metrics import Metrics
from ragtrace_evaluator.audit.audit_gauges import AuditGauges
from ragtrace_evaluator.audit.drift import BOUNDARIES
from ragtrace_evaluator.audit.periodic import Limits, WindowResult, judge_window
from ragtrace_store import GenerationRecord, LabelRecord, RankingRecord, RetrievalRecord, write_labels
from ragtrace_store.anchors import AnchorError, anchor_for, clear_anchor, list_anchors, set_anchor
from ragtrace_store.drift_verdicts import latest_drift

MANIFEST = "periodic-test-01"
T0 = datetime(2026, 3, 2, tzinfo=UTC)
HOUR = timedelta(hours=1)


def _tenant() -> str:
    return "periodic-" + os.urandom(4).hex()


def _record(trace_id: str, mode: str, service: str, release: str) -> LabelRecord:
    fabricated = mode == "fabrication"
    gen = None if mode == "retrieval_gap" else GenerationRecord(
        "contradicted" if fabricated else "entailed", 0.0 if fabricated else 1.0, False, None)
    return LabelRecord(trace_id, f"q-{trace_id[:8]}", release, service, MANIFEST, mode,
                       RetrievalRecord(mode != "retrieval_gap", mode not in ("retrieval_gap", "rank_inversion"), 1,
                                       "span"),
                       RankingRecord(mode != "rank_inversion", 0, 1), gen, mode == "ok",
                       1.0 if mode == "ok" else 0.0, 0.9)


def _write(store: Any, tenant: str, start: datetime, mix: dict[str, int], *, service: str = "qa",
           release: str = "v2") -> None:
    """Labels with exactly ``mix`` failure modes, their traces spread over the hour from ``start``."""
    modes = [m for m, k in mix.items() for _ in range(k)]
    step = HOUR / (len(modes) + 1)
    records, times = [], {}
    for i, mode in enumerate(modes):
        tid = os.urandom(16).hex()
        records.append(_record(tid, mode, service, release))
        times[tid] = start + step * (i + 1)
    write_labels(store, records, tenant=tenant, trace_times=times)


def _mix(n: int, fabrication: float) -> dict[str, int]:
    fixed = {"retrieval_gap": round(n * 0.05), "rank_inversion": round(n * 0.05), "under_use": round(n * 0.05),
             "fabrication": round(n * fabrication)}
    return {**fixed, "ok": n - sum(fixed.values())}


def _by(result: WindowResult, against: str) -> dict[str, int | None]:
    return {d.boundary: d.verdict for d in result.drift if d.against == against}


def test_a_slow_drift_is_caught_against_the_anchor_and_never_against_the_previous_window(chdb_store: Any) -> None:
    tenant, n = _tenant(), 2500
    # the signed-off release, a week before: fabrication 10 %
    _write(chdb_store, tenant, T0 - timedelta(days=7), _mix(n, 0.10), release="v1")
    set_anchor(chdb_store, tenant=tenant, service="qa", release="v1")
    results = []
    for i in range(8):
        start = T0 + i * HOUR
        _write(chdb_store, tenant, start, _mix(n, 0.10 + 0.01 * i))
        results.append(judge_window(chdb_store, tenant=tenant, manifest_id=MANIFEST, start=start, end=start + HOUR))

    first = results[0]
    assert all(v is None for v in _by(first, "previous").values())  # no previous window yet: undefined
    assert "no previous window" in next(d.reference for d in first.drift if d.against == "previous")
    for r in results[1:]:
        assert _by(r, "previous") == dict.fromkeys(BOUNDARIES, 0), r.start  # each step inside the noise
        fab = next(d for d in r.drift if d.against == "previous" and d.boundary == "fabrication")
        assert fab.delta == pytest.approx(0.01) and fab.lower is not None and fab.lower < 0 < fab.upper  # type: ignore[operator]
    anchor_fab = [_by(r, "anchor")["fabrication"] for r in results]
    print("fabrication against the anchor, window by window:", anchor_fab)
    assert anchor_fab[:2] == [0, 0] and anchor_fab[-3:] == [1, 1, 1], anchor_fab
    assert anchor_fab == sorted(anchor_fab)  # once significant, it stays so while the drift goes on
    for r in results:  # the other modes did not move against either reference
        assert {m: v for m, v in _by(r, "anchor").items() if m != "fabrication"} == dict.fromkeys(
            ("retrieval_gap", "rank_inversion", "under_use"), 0)
    last = results[-1]
    assert last.families[("qa", "anchor")]["family_false_alarm"] == 0.05
    assert last.families[("qa", "anchor")]["reference"] == "release v1"

    # the store kept the newest verdicts (the dashboard's and the metrics' after a restart)
    stored = latest_drift(chdb_store, tenant=tenant, manifest_id=MANIFEST)
    assert {(d.against, d.boundary): d.verdict for d in stored} == {
        (d.against, d.boundary): d.verdict for d in last.drift}
    assert {d.window_end for d in stored} == {last.end}

    # a time-window anchor over the same week-old traces says the same; cleared, the verdict is undefined
    set_anchor(chdb_store, tenant=tenant, service="qa", start=T0 - timedelta(days=7), end=T0 - timedelta(days=6))
    again = judge_window(chdb_store, tenant=tenant, manifest_id=MANIFEST, start=last.start, end=last.end, save=False)
    assert _by(again, "anchor")["fabrication"] == 1
    assert clear_anchor(chdb_store, tenant=tenant, service="qa")
    cleared = judge_window(chdb_store, tenant=tenant, manifest_id=MANIFEST, start=last.start, end=last.end, save=False)
    assert set(_by(cleared, "anchor").values()) == {None}
    assert not clear_anchor(chdb_store, tenant=tenant, service="qa")  # nothing left to clear


def test_anchors_per_service_fall_back_to_the_tenants_and_refuse_bad_input(chdb_store: Any) -> None:
    tenant = _tenant()
    assert anchor_for(chdb_store, tenant=tenant, service="qa") is None
    set_anchor(chdb_store, tenant=tenant, release="v7")  # every service
    set_anchor(chdb_store, tenant=tenant, service="search", start=T0, end=T0 + HOUR)
    qa, search = (anchor_for(chdb_store, tenant=tenant, service=s) for s in ("qa", "search"))
    assert qa is not None and qa.release == "v7" and qa.service == ""
    assert search is not None and search.start == T0 and search.end == T0 + HOUR and search.release is None
    assert [a.service for a in list_anchors(chdb_store, tenant=tenant)] == ["", "search"]
    assert anchor_for(chdb_store, tenant="someone-else", service="qa") is None  # tenants never share
    bad: Sequence[tuple[dict[str, Any], str]] = (
        ({}, "--release RELEASE or as a window"),
        ({"release": "v1", "start": T0, "end": T0 + HOUR}, "not both"),
        ({"release": "  "}, "empty"),
        ({"start": T0 + HOUR, "end": T0}, "not before"),
        ({"start": datetime(2026, 3, 2), "end": T0 + HOUR}, "no time zone"),
        ({"release": "v1\nfake"}, "control characters"),
    )
    for kwargs, message in bad:
        with pytest.raises(AnchorError, match=message):
            set_anchor(chdb_store, tenant=tenant, service="qa", **kwargs)


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_window_metrics_are_bounded_parsed_and_restored(chdb_store: Any) -> None:
    tenant = _tenant()
    start = T0 + timedelta(days=30)
    # 3 services x 4 releases; the newest services/releases are the ones written last
    for s, service in enumerate(("a", "b", "c")):
        for r in range(4):
            _write(chdb_store, tenant, start + timedelta(minutes=5 * (4 * s + r)),
                   {"fabrication": 2 + r, "ok": 18 - r}, service=service, release=f"r{r}")
    result = judge_window(chdb_store, tenant=tenant, manifest_id=MANIFEST, start=start, end=start + 2 * HOUR,
                          limits=Limits(releases=2, services=2))
    assert [c.service for c in result.services] == ["b", "c"]
    assert sorted((c.service, c.release) for c in result.releases) == [("b", "r2"), ("b", "r3"), ("c", "r2"),
                                                                       ("c", "r3")]
    assert result.dropped_groups == 8
    assert next(c for c in result.services if c.service == "c").complete == 80  # drift pools every release

    metrics = Metrics()
    gauges = AuditGauges(interval_seconds=900)
    metrics.register(gauges)
    gauges.update(result)
    got = _samples(metrics.render())
    group = (("labeller", MANIFEST), ("release", "r3"), ("service", "c"), ("tenant", tenant))
    assert got[("ragtrace_audit_failure_rate", tuple(sorted((*group, ("mode", "fabrication")))))] == 5 / 20
    low = got[("ragtrace_audit_failure_rate_lower", tuple(sorted((*group, ("mode", "fabrication")))))]
    high = got[("ragtrace_audit_failure_rate_upper", tuple(sorted((*group, ("mode", "fabrication")))))]
    assert 0 < low < 0.25 < high < 1
    assert got[("ragtrace_audit_rate", tuple(sorted((*group, ("metric", "grounded")))))] == 15 / 20
    assert got[("ragtrace_audit_rate", tuple(sorted((*group, ("metric", "abstention")))))] == 0
    assert got[("ragtrace_audit_sample_size", group)] == 20
    assert got[("ragtrace_audit_interval_seconds", ())] == 900
    assert got[("ragtrace_audit_window_seconds", (("tenant", tenant),))] == 7200
    assert got[("ragtrace_audit_groups_dropped", (("tenant", tenant),))] == 8
    assert not any(k[0] == "ragtrace_audit_sample_size" and ("service", "a") in k[1] for k in got)  # bounded
    drift = {k: v for k, v in got.items() if k[0] == "ragtrace_drift"}
    assert len(drift) == 2 * 2 * len(BOUNDARIES) and all(math.isnan(v) for v in drift.values())  # undefined
    assert got[("ragtrace_audit_rate", tuple(sorted((*group, ("metric", "gold_in_context")))))] == 1

    restored = AuditGauges(interval_seconds=900)
    assert restored.restore(chdb_store, tenant)
    fresh = Metrics()
    fresh.register(restored)
    again = _samples(fresh.render())
    same = [k for k in got if k[0].startswith(("ragtrace_audit_failure_rate", "ragtrace_audit_rate",
                                               "ragtrace_audit_sample_size"))]
    assert same and all(again[k] == got[k] or (math.isnan(again[k]) and math.isnan(got[k])) for k in same)
    assert not AuditGauges(1).restore(chdb_store, "nobody-" + os.urandom(4).hex())


def test_undefined_rates_are_nan(chdb_store: Any) -> None:
    tenant = _tenant()
    start = T0 + timedelta(days=60)
    _write(chdb_store, tenant, start, {"retrieval_gap": 3})  # no answer judged, no gold-in-context
    result = judge_window(chdb_store, tenant=tenant, manifest_id=MANIFEST, start=start, end=start + HOUR)
    gauges = AuditGauges(interval_seconds=60)
    gauges.update(result)
    metrics = Metrics()
    metrics.register(gauges)
    got = _samples(metrics.render())
    group = (("labeller", MANIFEST), ("release", "v2"), ("service", "qa"), ("tenant", tenant))
    for metric in ("grounded", "pass", "abstention"):
        for suffix in ("", "_lower", "_upper"):
            assert math.isnan(got[(f"ragtrace_audit_rate{suffix}", tuple(sorted((*group, ("metric", metric)))))])
    assert got[("ragtrace_audit_rate", tuple(sorted((*group, ("metric", "gold_in_context")))))] == 0  # 0 of 3 known
    assert got[("ragtrace_audit_failure_rate", tuple(sorted((*group, ("mode", "retrieval_gap")))))] == 1
