"""`ragtrace compare` on releases in the store: the audit's `labels` rows (written exactly as
`ragtrace audit` writes them), one labeller manifest per comparison."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from ragtrace_cli.commands.compare import compare_main
from ragtrace_evaluator.audit.run import label_row
from ragtrace_evaluator.compare.comparison import compare, pair
from ragtrace_evaluator.compare.records import load_pair, load_release, release_manifests
from ragtrace_store import LABEL_COLUMNS
from tests.counting_store import CountingStore

from .story import story_records


def _insert(store: Any, tenant: str, records: list[dict[str, Any]], *, release: str, manifest: str) -> None:
    t = datetime(2026, 11, 1, tzinfo=UTC)
    rows = [label_row({**r, "release": release, "manifest_id": manifest, "trace_id": f"{release}-{r['query_id']}"},
                      tenant=tenant, trace_time=t) for r in records]
    store.insert("labels", rows, LABEL_COLUMNS)


def test_releases_in_the_store_compare_like_the_files(chdb_store: Any) -> None:
    tenant = f"compare-{uuid.uuid4().hex[:8]}"
    base, cand = story_records()
    _insert(chdb_store, tenant, base, release="v1", manifest="m-story")
    _insert(chdb_store, tenant, cand, release="v2", manifest="m-story")
    (a,) = load_release(chdb_store, "v1", tenant=tenant)
    (b,) = load_release(chdb_store, "v2", tenant=tenant)
    assert a.source == "store" and a.manifest_ids == ("m-story",) and len(a.labels) == 400
    c = compare(a, b, n_resamples=1000, seed=0, warn=False)
    rep = c.to_json()
    assert rep["decomposition"]["baseline"]["recall"] == pytest.approx(0.81)
    assert rep["decomposition"]["candidate"]["p_pass_given_gold"] == pytest.approx(246 / 264)
    lost = next(m for m in rep["movers"] if m["boundary"] == "gold_in_context" and m["direction"] == "lost")
    assert lost["n"] == 61 and lost["candidate_trace_ids"][0].startswith("v2-")
    assert c.tripped
    # Tenancy: another tenant sees nothing.
    assert load_release(chdb_store, "v1", tenant=tenant + "-other") == []
    # A second manifest for v1 appears as its own label set, newest first.
    _insert(chdb_store, tenant, base[:10], release="v1", manifest="m-newer")
    sets = load_release(chdb_store, "v1", tenant=tenant)
    assert [s.manifest_ids for s in sets] == [("m-newer",), ("m-story",)]
    (only,) = load_release(chdb_store, "v1", tenant=tenant, manifest_id="m-story")
    assert len(only.labels) == 400


@pytest.mark.parametrize("paired", [40, 200])
def test_the_engine_pairs_and_reads_only_the_paired_labels(chdb_store: Any, paired: int) -> None:
    """Two releases with `paired` query ids in common (and some only in one, a duplicate, records
    without a query id): the engine's pairing gives the comparison reading every label gives, and
    returns one row per paired label (plus one per side for what is not read)."""
    tenant = f"pairing-{uuid.uuid4().hex[:8]}"
    base, cand = story_records()
    only = 100
    a_recs = base[: only + paired]
    b_recs = cand[only : only + paired + only]
    # the same query asked twice in v1 (the later trace's label is kept), and unpairable records
    a_recs += [{**base[only], "trace_id": "again"}, {**base[1], "query_id": ""}]
    b_recs += [{**cand[2], "query_id": ""}]
    t = datetime(2026, 11, 1, tzinfo=UTC)
    for release, recs in (("v1", a_recs), ("v2", b_recs)):
        rows = [label_row({**r, "release": release, "manifest_id": "m-pair",
                           "trace_id": f"{release}-{r.get('trace_id', r['query_id'])}-{i}"},
                          tenant=tenant, trace_time=t + timedelta(seconds=i)) for i, r in enumerate(recs)]
        chdb_store.insert("labels", rows, LABEL_COLUMNS)
    (a,) = load_release(chdb_store, "v1", tenant=tenant)
    (b,) = load_release(chdb_store, "v2", tenant=tenant)
    counting = CountingStore(chdb_store)
    assert release_manifests(chdb_store, "v1", tenant=tenant) == ["m-pair"]
    pa, pb = load_pair(counting, ("v1", "m-pair"), ("v2", "m-pair"), tenant=tenant)
    assert len(pa.labels) == len(pb.labels) == paired and len(a.labels) == only + paired
    assert pa.unpaired == tuple(sorted(r["query_id"] for r in base[:only]))
    # what Python is handed grows with the paired queries: each paired label (the duplicate's two
    # records both) and a row per side of counts and unpaired ids
    assert counting.rows == 2 * paired + 1 + 2
    assert pair(pa, pb) == pair(a, b)
    assert pair(pa, pb).to_json(pa, pb) == pair(a, b).to_json(a, b)
    assert (pa.n_duplicates, len(pa.no_query_id), len(pb.no_query_id)) == (1, 1, 1)
    assert (pa.n_queries, pb.n_queries, pa.manifest_ids) == (a.n_queries, b.n_queries, a.manifest_ids)
    engine, python = (compare(x, y, n_resamples=300, seed=0, warn=False).to_json() for x, y in ((pa, pb), (a, b)))
    assert engine == python
    # a release against itself pairs every query
    same = load_pair(chdb_store, ("v1", "m-pair"), ("v1", "m-pair"), tenant=tenant)
    assert same == (a, a)


def test_the_pairing_reads_each_labels_newest_version(chdb_store: Any) -> None:
    """Labels re-written in later parts (as a re-run audit writes them): the pairing and every label
    read are the newest version's, across parts the engine has not merged. An older version that
    names the other release, or a query id the newest no longer has, stands for nothing."""
    tenant = f"pairing-versions-{uuid.uuid4().hex[:8]}"
    base, cand = story_records()
    assert [r["query_id"] for r in base[:30]] == [r["query_id"] for r in cand[:30]]
    t0, t1 = datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 2, tzinfo=UTC)

    def write(labels: list[tuple[str, dict[str, Any]]], release: str, at: datetime, when: datetime = t0) -> None:
        """(trace id, record) pairs of ``release`` labelled at ``at``, traces started ``when``: one part."""
        rows = [(*label_row({**r, "release": release, "manifest_id": "m-ver", "trace_id": trace}, tenant=tenant,
                            trace_time=when)[:-1], at) for trace, r in labels]
        chdb_store.insert("labels", rows, LABEL_COLUMNS)

    write([(f"a{i}", r) for i, r in enumerate(base[:30])], "v1", t0)
    write([(f"b{i}", r) for i, r in enumerate(cand[:30])], "v2", t0)
    # newer versions: v1's first trace now belongs to v3 (its root re-decided, a start time in the next
    # month: the new version is in another partition), v2's second trace carries another query id (so
    # the second query no longer pairs), v1's third trace passes
    write([("a0", base[0])], "v3", t1, datetime(2026, 12, 1, tzinfo=UTC))
    write([("b1", {**cand[1], "query_id": "q-renamed"})], "v2", t1)
    write([("a2", {**base[2], "pass": not base[2]["pass"], "score": 0.375})], "v1", t1)

    (a,) = load_release(chdb_store, "v1", tenant=tenant)
    (b,) = load_release(chdb_store, "v2", tenant=tenant)
    pa, pb = load_pair(chdb_store, ("v1", "m-ver"), ("v2", "m-ver"), tenant=tenant)
    q0, q1, q2 = (r["query_id"] for r in base[:3])
    assert q0 not in {lab.query_id for lab in pa.labels} | set(pa.unpaired)
    assert (pa.unpaired, pb.unpaired) == ((q1,), tuple(sorted((q0, "q-renamed"))))
    assert next(lab for lab in pa.labels if lab.query_id == q2).score == 0.375
    assert (len(pa.labels), pa.n_queries, pb.n_queries) == (28, 29, 30)
    assert pair(pa, pb) == pair(a, b)
    assert release_manifests(chdb_store, "v3", tenant=tenant) == ["m-ver"]


@pytest.fixture(scope="module")
def http_store(chdb_http_server: str) -> tuple[str, str]:
    """Two releases (and a stray manifest) in a ClickHouse-over-HTTP store that any process can use."""
    from ragtrace_store import open_store

    tenant = f"compare-http-{uuid.uuid4().hex[:8]}"
    base, cand = story_records()
    with open_store(chdb_http_server, migrate=True) as store:
        _insert(store, tenant, base, release="v1", manifest="m1")
        _insert(store, tenant, cand, release="v2", manifest="m1")
        _insert(store, tenant, cand[:50], release="v3", manifest="m2")
        _insert(store, tenant, base[:50], release="v4", manifest="m1")
        _insert(store, tenant, base[:50], release="v4", manifest="m2")
    return chdb_http_server, tenant


def test_cli_compares_store_releases(http_store: tuple[str, str], tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    url, tenant = http_store
    out = tmp_path / "r.json"
    code = compare_main(["--baseline", "v1", "--candidate", "v2", "--store", url, "--tenant", tenant,
                         "--json", str(out), "--resamples", "1000"])
    assert code == 1
    rep = json.loads(out.read_text())
    assert rep["baseline"] == {"name": "v1", "source": "store", "manifest_ids": ["m1"], "n_queries": 400}
    assert rep["decomposition"]["delta"]["e2e"] == pytest.approx(0.0075)
    assert "GATE TRIPPED recall_5" in capsys.readouterr().out


def test_cli_refuses_labels_of_different_manifests(http_store: tuple[str, str],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    url, tenant = http_store
    common = ["--store", url, "--tenant", tenant, "--resamples", "300"]
    assert compare_main(["--baseline", "v1", "--candidate", "v3", *common]) == 2
    assert "labeller manifests" in capsys.readouterr().err
    assert compare_main(["--baseline", "v1", "--candidate", "v3", "--force", *common]) in (0, 1)
    # One release labelled under two manifests: choose one.
    assert compare_main(["--baseline", "v4", "--candidate", "v1", *common]) == 2
    assert "--manifest" in capsys.readouterr().err
    assert compare_main(["--baseline", "v4", "--candidate", "v1", "--manifest", "m1", *common]) in (0, 1)
    assert compare_main(["--baseline", "nope", "--candidate", "v1", *common]) == 2
    assert "no audit labels for release 'nope'" in capsys.readouterr().err


def test_audit_then_compare_end_to_end(chdb_store: Any) -> None:
    """Traces as the collector stores them → `run_audit` per release → compare from the labels table."""
    from dataclasses import replace

    # tests/ is on sys.path (pytest prepend mode, packages without a top-level __init__)
    from audit.fixtures import KeywordGrounding, scenario, write_traces

    from ragtrace_evaluator.audit.run import run_audit

    tenant = f"compare-e2e-{uuid.uuid4().hex[:8]}"
    base = scenario("b", release="r1")
    cand = scenario("c", release="r2")
    # The candidate's chunking change: the two clean questions lose their evidence.
    lose = {"ok": "retrieval_gap", "ok-2": "retrieval_gap-refusal"}
    traces = []
    for key, tr in base.items():
        traces.append(replace(tr, query_id=f"Q-{key}"))
        donor = cand[lose.get(key, key)]
        traces.append(replace(donor, trace_id=f"c-{key}", query_id=f"Q-{key}"))
    write_traces(chdb_store, tenant, traces)
    for release in ("r1", "r2"):
        run_audit(chdb_store, tenant=tenant, release=release, grounding=KeywordGrounding(),
                  relevance_labeller=None)
    (a,) = load_release(chdb_store, "r1", tenant=tenant)
    (b,) = load_release(chdb_store, "r2", tenant=tenant)
    assert a.manifest_ids == b.manifest_ids
    c = compare(a, b, n_resamples=500, seed=0, warn=False)
    assert c.pairing.query_ids and not c.pairing.only_baseline and not c.pairing.only_candidate
    lost = next(m for m in c.movers if m.boundary == "gold_in_context" and m.direction == "lost")
    assert set(lost.query_ids) == {"Q-ok", "Q-ok-2"}
    assert set(lost.candidate_trace_ids) == {"c-ok", "c-ok-2"}
    rep = c.to_json()
    assert rep["decomposition"]["delta"]["recall"] < 0


def test_the_store_read_is_what_the_validated_records_say(chdb_store: Any) -> None:
    """load_release takes from each row only what a comparison uses (columns, and parts of detail the
    engine extracts); it is the same LabelSummary as validating the whole stored record, for complete,
    abstained, incomplete and generation-less records and a re-labelled trace (newest version)."""
    from ragtrace_store import LabelRecord, LabelSummary, read_labels

    tenant = f"compare-lean-{uuid.uuid4().hex[:8]}"
    base, _cand = story_records()
    odd = [{**base[0], "query_id": "q-nogen", "generation": None},
           {**base[1], "query_id": "q-marked", "incomplete": True},
           LabelRecord.incomplete(trace_id="x", query_id="q-inc", release="v1", service="qa", manifest_id="m",
                                  reasons=["missing_stage: no retriever span"]).to_json()]
    _insert(chdb_store, tenant, [*base, *odd], release="v1", manifest="m-lean")
    _insert(chdb_store, tenant, [{**base[2], "pass": not base[2]["pass"], "score": 0.125}], release="v1",
            manifest="m-lean")  # a newer version of one trace's label
    (got,) = load_release(chdb_store, "v1", tenant=tenant)
    want = [LabelSummary.from_record(r) for r in read_labels(chdb_store, tenant=tenant, release="v1")]
    assert list(got.labels) == want and len(want) == len(base) + 3
    assert {lab.verdict for lab in got.labels} >= {"abstained", None}
    assert any(lab.refusal_justified is not None for lab in got.labels)
    assert [lab.failure_mode for lab in got.labels if lab.query_id in ("q-marked", "q-inc")] == ["incomplete"] * 2
    assert next(lab for lab in got.labels if lab.query_id == base[2]["query_id"]).score == 0.125


def test_a_stored_label_that_is_not_a_record_is_refused(chdb_store: Any) -> None:
    from ragtrace_evaluator.compare.records import CompareError

    tenant = f"compare-bad-{uuid.uuid4().hex[:8]}"
    base, _cand = story_records()
    _insert(chdb_store, tenant, base[:3], release="v1", manifest="m-bad")
    row = list(label_row({**base[3], "release": "v1", "manifest_id": "m-bad", "trace_id": "v1-broken"},
                         tenant=tenant, trace_time=datetime(2026, 11, 1, tzinfo=UTC)))
    row[LABEL_COLUMNS.index("detail")] = '{"metrics": {"recall_5": "high"'  # the detail column, cut short
    chdb_store.insert("labels", [tuple(row)], LABEL_COLUMNS)
    with pytest.raises(CompareError, match="trace_id=v1-broken: the detail column is not JSON; re-run"):
        load_release(chdb_store, "v1", tenant=tenant)
