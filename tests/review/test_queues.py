"""Queues on the real chDB engine: stratified enqueue, K distinct reviewers, never shown twice."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from ragtrace_review import auth
from ragtrace_review.errors import ReviewError
from ragtrace_review.queues import (
    enqueue,
    list_items,
    next_item,
    progress,
    record_decision,
)
from ragtrace_store import Store

from .rows import label_record, write_labels

Seeder = Callable[..., list[dict[str, Any]]]


def test_enqueue_stratifies_so_rare_modes_are_seen(store: Store, tenant: str, seeded: Seeder) -> None:
    # 30 ok, 6 fabrication, 1 under_use: a uniform sample of 8 would likely miss under_use.
    modes = ["ok"] * 30 + ["fabrication"] * 6 + ["under_use"]
    records = seeded(modes)
    res = enqueue(store, "strat", None, per_mode=3, reviewers=2, tenant=tenant)
    items = list_items(store, tenant=tenant, queue="strat")
    by_mode = Counter(it.failure_mode for it in items)
    assert by_mode == {"ok": 3, "fabrication": 3, "under_use": 1}
    assert res.added == {"mode:fabrication": 3, "mode:under_use": 1, "mode:ok": 3}
    assert res.candidates == len(records)
    # interleaved: the first three items already span all three modes
    assert {it.failure_mode for it in items[:3]} == {"ok", "fabrication", "under_use"}
    # deterministic: the same traces on a rerun of the same inputs elsewhere, and idempotent here
    again = enqueue(store, "strat", None, per_mode=3, reviewers=2, tenant=tenant)
    assert again.total_added == 0 and again.already_queued == 7
    assert [it.trace_id for it in list_items(store, tenant=tenant, queue="strat")] == [it.trace_id for it in items]
    # a larger cap tops the queue up without duplicates
    more = enqueue(store, "strat", None, per_mode=4, reviewers=2, tenant=tenant)
    assert more.added == {"mode:fabrication": 1, "mode:ok": 1}
    assert len({it.trace_id for it in list_items(store, tenant=tenant, queue="strat")}) == 9


def test_low_confidence_and_disagreement_strata(store: Store, tenant: str, seeded: Seeder) -> None:
    records = seeded(["ok"] * 6)
    # trace 0 is unsure; trace 1 gets a different mode from a second labeller manifest
    write_labels(store, tenant, [label_record(records[0]["trace_id"], "ok", confidence=0.3, query_id="x")])
    write_labels(store, tenant, [label_record(records[1]["trace_id"], "fabrication", manifest_id="m-other")])
    res = enqueue(store, "flags", None, per_mode=1, reviewers=1, tenant=tenant, manifest_id="m-test")
    items = {it.trace_id: it for it in list_items(store, tenant=tenant, queue="flags")}
    assert items[records[1]["trace_id"]].reason == "disagreement"
    assert items[records[0]["trace_id"]].reason == "low_confidence"
    assert items[records[0]["trace_id"]].confidence == pytest.approx(0.3)
    assert res.added == {"disagreement": 1, "low_confidence": 1, "mode:ok": 1}
    # the snapshot carries the label under review, with its manifest
    assert all(it.manifest_id == "m-test" and it.label["trace_id"] == it.trace_id for it in items.values())


def test_enqueue_from_in_memory_labels_and_validation(store: Store, tenant: str) -> None:
    recs = [label_record(f"{tenant}-mem{i}", "rank_inversion") for i in range(3)]
    res = enqueue(store, "mem", recs, per_mode=2, reviewers=1, tenant=tenant)
    assert res.total_added == 2
    with pytest.raises(ReviewError, match="already exists with 1 reviewers"):
        enqueue(store, "mem", recs, per_mode=2, reviewers=3, tenant=tenant)
    with pytest.raises(ReviewError, match="invalid queue name"):
        enqueue(store, "bad name!", recs, tenant=tenant)
    with pytest.raises(ReviewError, match="no labels yet"):
        enqueue(store, "empty", None, tenant=tenant)


@pytest.mark.parametrize("threshold", [1.5, -0.1, float("nan")])
def test_a_low_confidence_threshold_outside_0_1_is_refused(store: Store, tenant: str, threshold: float) -> None:
    recs = [label_record(f"{tenant}-lc{i}", "ok") for i in range(3)]
    with pytest.raises(ReviewError, match=r"low_confidence is a labeller confidence in \[0, 1\]"):
        enqueue(store, "lc", recs, low_confidence=threshold, tenant=tenant)
    assert list_items(store, tenant=tenant, queue="lc") == []


def test_a_manifest_or_release_that_matches_no_label_is_an_error(store: Store, tenant: str, seeded: Seeder) -> None:
    seeded(["ok", "fabrication"])
    with pytest.raises(ReviewError, match="no labels under manifest 'm-nope' in tenant"):
        enqueue(store, "typo", None, manifest_id="m-nope", tenant=tenant)
    with pytest.raises(ReviewError, match="no labels under manifest 'm-test' for release 'r-nope' in tenant"):
        enqueue(store, "typo", None, release="r-nope", tenant=tenant)
    assert list_items(store, tenant=tenant, queue="typo") == []
    assert enqueue(store, "typo", None, tenant=tenant).total_added == 2


def test_k_distinct_reviewers_and_never_twice(store: Store, tenant: str, seeded: Seeder) -> None:
    seeded(["ok", "fabrication", "under_use"])
    enqueue(store, "k2", None, per_mode=5, reviewers=2, tenant=tenant)
    alice, _ = auth.add_reviewer(store, "alice", tenant=tenant)
    bob, _ = auth.add_reviewer(store, "bob", tenant=tenant)
    carol, _ = auth.add_reviewer(store, "carol", tenant=tenant)

    seen: dict[str, list[str]] = {}
    for reviewer in (alice, bob, carol):
        seen[reviewer.name] = []
        while (t := next_item(store, reviewer, "k2")) is not None:
            # asking again before deciding returns the same held item, never a second one
            assert next_item(store, reviewer, "k2") == t
            item_claims = 2
            record_decision(store, reviewer, "k2", t, failure_mode="ok", claims=["entailed"] * item_claims)
            seen[reviewer.name].append(t)
    assert len(seen["alice"]) == 3 and len(seen["bob"]) == 3
    assert seen["carol"] == []  # every item already has K = 2 reviewers
    for name, ids in seen.items():
        assert len(ids) == len(set(ids)), f"{name} was shown an item twice"
    p = progress(store, tenant=tenant, queue="k2")
    assert (p.items, p.complete, p.decisions, p.target) == (3, 3, 6, 6)
    assert {r.name: r.decided for r in p.reviewers} == {"alice": 3, "bob": 3}
    assert p.percent == pytest.approx(100.0)


def test_decision_validation(store: Store, tenant: str, seeded: Seeder) -> None:
    seeded(["ok"])
    enqueue(store, "v", None, per_mode=5, reviewers=1, tenant=tenant)
    dave, _ = auth.add_reviewer(store, "dave", tenant=tenant)
    erin, _ = auth.add_reviewer(store, "erin", tenant=tenant)
    t = next_item(store, dave, "v")
    assert t is not None
    with pytest.raises(ReviewError, match="not assigned to you"):
        record_decision(store, erin, "v", t, failure_mode="ok", claims=["entailed", "neutral"])
    with pytest.raises(ReviewError, match="not one of"):
        record_decision(store, dave, "v", t, failure_mode="broken", claims=["entailed", "neutral"])
    with pytest.raises(ReviewError, match="each of the 2 claims"):
        record_decision(store, dave, "v", t, failure_mode="ok", claims=["entailed"])
    d = record_decision(store, dave, "v", t, failure_mode="fabrication", claims=["entailed", "contradicted"],
                        relevance={"d1": True, "d2": False}, note="second claim is made up")
    assert d.labeller_failure_mode == "ok" and d.manifest_id == "m-test"
    with pytest.raises(ReviewError, match="already reviewed"):
        record_decision(store, dave, "v", t, failure_mode="ok", claims=["entailed", "neutral"])


def test_abandoned_lease_goes_to_someone_else(store: Store, tenant: str, seeded: Seeder) -> None:
    from datetime import timedelta

    seeded(["fabrication"])
    enqueue(store, "lease", None, per_mode=5, reviewers=1, tenant=tenant)
    ann, _ = auth.add_reviewer(store, "ann", tenant=tenant)
    bob, _ = auth.add_reviewer(store, "bob", tenant=tenant)
    held = next_item(store, ann, "lease", lease=timedelta(minutes=30))
    assert held is not None
    assert next_item(store, bob, "lease") is None  # K = 1 and ann holds it
    # ann's lease lapses (simulated with a zero-length lease on a fresh queue item)
    seeded(["ok"])
    enqueue(store, "lease", None, per_mode=5, reviewers=1, tenant=tenant)
    record_decision(store, ann, "lease", held, failure_mode="fabrication", claims=["entailed", "neutral"])
    lapsed = next_item(store, ann, "lease", lease=timedelta(0))
    assert lapsed is not None and lapsed != held
    assert next_item(store, bob, "lease") == lapsed  # offered to bob once ann's lease is over
    # ann still gets back the item she was given (she may finish it), never a new one
    assert next_item(store, ann, "lease") == lapsed
