"""`ragtrace store` against a ClickHouse HTTP endpoint (chDB behind it), as a user runs it."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

from ragtrace_store import open_store

RAGTRACE = str(Path(sys.executable).with_name("ragtrace"))


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([RAGTRACE, "store", *args], capture_output=True, text=True, timeout=120)


def test_migrate_status_retention_and_print(chdb_http_server: str) -> None:
    url = chdb_http_server.rsplit("/", 1)[0] + f"/cli_{uuid.uuid4().hex[:8]}"  # a fresh database
    first = _run("migrate", "--store", url)
    assert first.returncode == 0, first.stderr
    assert "0001_core" in first.stdout and "0002_labels" in first.stdout
    again = _run("migrate", "--store", url)
    assert again.returncode == 0 and "up to date" in again.stdout
    status = _run("status", "--store", url)
    assert status.returncode == 0 and "pending    none" in status.stdout
    assert "queries           0 rows" in status.stdout and "reference_answers 0 rows" in status.stdout
    ttl = _run("retention", "--store", url, "--days", "30")
    assert ttl.returncode == 0 and "30 day" in ttl.stdout
    store = open_store(url, migrate=False)
    try:
        (engine,) = store.query_rows("SELECT engine_full FROM system.tables WHERE database = {d:String} "
                                     "AND name = 'spans'", {"d": store.database})[0]
    finally:
        store.close()
    assert "TTL toDateTime(start_time) + toIntervalDay(30)" in engine
    printed = _run("migrate", "--variant", "cluster", "--cluster", "prod", "--print")
    assert printed.returncode == 0 and "ON CLUSTER 'prod'" in printed.stdout and "{cluster}" not in printed.stdout
    assert _run("migrate", "--variant", "cluster").returncode == 2  # needs --cluster
    bad = _run("status", "--store", "http://127.0.0.1:1/nowhere")
    assert bad.returncode == 2 and "cannot reach" in bad.stderr


def test_a_server_that_refuses_is_reported_once_in_our_words() -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on once it is closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = _run("status", "--store", f"http://127.0.0.1:{port}/db")
    assert out.returncode == 2
    assert f"ragtrace store: cannot reach the ClickHouse server at 127.0.0.1:{port}" in out.stderr
    # the driver's own warning used to reach stderr too, through logging's last-resort handler
    assert "Unexpected Http Driver Exception" not in out.stderr


def test_the_clustered_schema_on_an_embedded_store_says_it_needs_a_server(tmp_path: Path) -> None:
    # before: "failed: the clustered schema needs a cluster name" although --cluster was given (an
    # embedded store dropped it), after creating the directory; serve --cluster said the same
    store_dir = tmp_path / "embedded"
    done = _run("migrate", "--variant", "cluster", "--cluster", "c1", "--store", str(store_dir))
    assert done.returncode == 2, done.stderr
    assert "is an embedded store, one node" in done.stderr and "needs a ClickHouse server URL" in done.stderr
    assert "needs a cluster name" not in done.stderr and not store_dir.exists()
    serve = subprocess.run([RAGTRACE, "serve", "--store", str(store_dir), "--port", "0", "--cluster", "c1"],
                           capture_output=True, text=True, timeout=120)
    assert serve.returncode == 2 and "is an embedded store, one node" in serve.stderr, serve.stderr


def test_a_cluster_name_without_the_cluster_variant_is_a_usage_error() -> None:
    # before: `migrate --cluster prod --print` printed the single-node schema and ignored the name
    done = _run("migrate", "--cluster", "prod", "--print")
    assert done.returncode == 2 and "add --variant cluster" in done.stderr and done.stdout == ""
