"""Every reader on a two-shard cluster of the real engine returns what it returns on one node.

The cluster is chDB's own Distributed engine over the schema `load_migrations("cluster")` generates,
with two shards in one process (tests/store/cluster_engine.py says what that cannot show). On one
node a subquery over ``queries`` inside a read of ``queries`` is ordinary; over Distributed tables
the engine's default ``distributed_product_mode = 'deny'`` refuses it on any cluster of two shards,
so without `Store`'s cluster setting the audit, the stratified sample, the footer's count and the
documents read all failed here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

HELPER = Path(__file__).resolve().parent / "cluster_engine.py"


@pytest.fixture(scope="module")
def side_by_side(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    where = tmp_path_factory.mktemp("cluster")
    out = subprocess.run([sys.executable, str(HELPER), str(where)], capture_output=True, text=True, timeout=600,
                         check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def test_the_cluster_has_two_shards_read_in_place(side_by_side: dict[str, Any]) -> None:
    # two shards, both this engine: what makes the Distributed engine plan a distributed query
    assert side_by_side["_shards"] == [2, 2]
    assert side_by_side["_statements"] > 40  # the whole generated schema ran
    # a store opened without a variant reads as the cluster its tables say it is
    assert side_by_side["_adopted"] == [True, "cluster", "two"]
    assert sorted(READERS) == sorted(k for k in side_by_side if not k.startswith("_"))  # each reader is checked


def test_migration_0005_on_the_cluster_keys_the_rows_written_before_it(side_by_side: dict[str, Any]) -> None:
    # the traces were written by the schema before 0005, which then ran (ALTER ... MATERIALIZE
    # PROJECTION on queries_local); the readers below use those keys
    assert side_by_side["_projections"] == ["by_hash", "by_time"]


READERS = [
    "read_traces",
    "the collector's traces, read",
    "read_traces release, limit",
    "read_traces with content",
    "count_traces release",
    "count_traces window",
    "sample rate",
    "sample N",
    "sample per release",
    "sample per release, shard 1/2",
    "sample of a release",
    "sample of a window",
    "read_labels",
    "compare's read",
    "trace list, release",
    "trace list, window, a mode",
    "the dashboard's series",
    "a review queue worked to the end",
]


@pytest.mark.parametrize("reader", READERS)
def test_a_reader_on_the_cluster_returns_the_single_node_result(side_by_side: dict[str, Any], reader: str) -> None:
    single, cluster = side_by_side[reader]
    assert not (isinstance(single, str) and single.startswith("error:")), single
    assert single, f"{reader}: the single-node result is empty, so the comparison shows nothing"
    assert cluster == single
