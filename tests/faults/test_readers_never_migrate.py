"""Reading never migrates, and an unusable store exits 2 in every command.

Before, `audit`, `labels import`, `review ...` and `reviewers ...` opened the store with
``migrate=True``: pointed at an empty or older store they silently applied the single-node schema
(a cluster included), and an unopenable store exited 1 in some commands and 2 in others. Each
reader is run here against a real engine (chDB behind ClickHouse's HTTP interface, its own
process and data) and against an embedded directory owned by a running `ragtrace serve`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ragtrace_cli.commands.audit import audit_main, labels_main
from ragtrace_cli.commands.compare import compare_main
from ragtrace_cli.commands.review import review_main, reviewers_main
from ragtrace_cli.commands.store import store_main
from ragtrace_cli.commands.traces import traces_main
from ragtrace_store import load_migrations, open_store
from tests import otlp_builders as T

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from chdb_http import ChdbHttpServer

RAGTRACE = str(Path(sys.executable).with_name("ragtrace"))
Main = Callable[[list[str]], int]


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[str]:
    """A store URL on an engine of its own (nothing migrated)."""
    server = ChdbHttpServer(tmp_path / "engine")
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


def _readers(url: str, tmp_path: Path) -> list[tuple[str, Main, list[str]]]:
    refs = tmp_path / "refs.jsonl"
    refs.write_text(json.dumps({"query_id": "q1", "reference": "an answer"}) + "\n", encoding="utf-8")
    return [
        ("audit", audit_main, ["--store", url, "--sample", "5", "--quiet"]),
        ("labels import", labels_main, ["import", str(refs), "--store", url]),
        ("review", review_main, ["status", "--store", url]),
        ("reviewers", reviewers_main, ["list", "--store", url]),
        ("traces", traces_main, ["--store", url]),
        ("compare", compare_main, ["--baseline", "v1", "--candidate", "v2", "--store", url]),
    ]


def _schema(url: str) -> tuple[list[str], list[int]]:
    """(tables of the ragtrace database, applied schema versions), read without migrating."""
    with open_store(url, migrate=False) as st:
        tables = [r[0] for r in st.query_rows("SELECT name FROM system.tables WHERE database = 'ragtrace' "
                                              "ORDER BY name")]
        return tables, sorted(st.applied_versions())


def test_readers_refuse_an_unmigrated_store_and_create_nothing(engine: str, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    for name, main, argv in _readers(engine, tmp_path):
        code = main(argv)
        err = capsys.readouterr().err
        assert code == 2, (name, err)
        assert "has no ragtrace schema" in err and "ragtrace store migrate --store" in err, (name, err)
        assert _schema(engine) == ([], []), f"`ragtrace {name}` changed the schema"


def test_readers_refuse_an_older_schema_until_store_migrate(engine: str, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    # a store an older release migrated: it knows versions 1-4 only
    with open_store(engine, migrate=True) as st:
        st.command(f"ALTER TABLE {st.table('schema_migrations')} DELETE WHERE version > 4 "
                   "SETTINGS mutations_sync = 1")
    tables, versions = _schema(engine)
    assert versions == [1, 2, 3, 4]
    missing = ", ".join(f"{m.version:04d}_{m.name}" for m in load_migrations() if m.version > 4)
    for name, main, argv in _readers(engine, tmp_path):
        code = main(argv)
        err = capsys.readouterr().err
        assert code == 2, (name, err)
        assert f"has an older schema (missing {missing})" in err, (name, err)
        assert _schema(engine) == (tables, [1, 2, 3, 4]), f"`ragtrace {name}` migrated the store"
    # the remedy the message names works, and then the same commands read
    assert store_main(["migrate", "--store", engine]) == 0
    assert _schema(engine)[1] == [m.version for m in load_migrations()]
    capsys.readouterr()
    readers = dict((name, (main, argv)) for name, main, argv in _readers(engine, tmp_path))
    for name in ("labels import", "review", "reviewers", "traces"):
        main, argv = readers[name]
        assert main(argv) == 0, (name, capsys.readouterr().err)


def test_an_unusable_embedded_store_exits_2_in_every_command(tmp_path: Path) -> None:
    refs = tmp_path / "refs.jsonl"
    refs.write_text(json.dumps({"query_id": "q1", "reference": "an answer"}) + "\n", encoding="utf-8")
    commands = {
        "audit": ["audit", "--sample", "5", "--quiet"],
        "labels import": ["labels", "import", str(refs)],
        "review": ["review", "status"],
        "reviewers": ["reviewers", "list"],
        "traces": ["traces"],
        "compare": ["compare", "--baseline", "v1", "--candidate", "v2"],
    }

    def run_all(store: Path) -> dict[str, subprocess.CompletedProcess[str]]:
        procs = {name: subprocess.Popen([RAGTRACE, *argv, "--store", str(store)], stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True) for name, argv in commands.items()}
        out = {}
        for name, proc in procs.items():
            stdout, stderr = proc.communicate(timeout=180)
            out[name] = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
        return out

    # a directory that does not exist is neither created nor migrated
    missing = tmp_path / "no-such-store"
    for name, done in run_all(missing).items():
        assert done.returncode == 2, (name, done.stderr)
        assert "there is no store at" in done.stderr, (name, done.stderr)
    assert not missing.exists()

    # an embedded store owned by a running collector
    store_dir, log = tmp_path / "store", tmp_path / "serve.log"
    port = T.free_port()
    proc = subprocess.Popen([RAGTRACE, "serve", "--store", str(store_dir), "--port", str(port),
                             "--spool-dir", str(tmp_path / "spool")], stdout=log.open("ab"), stderr=subprocess.STDOUT)
    try:
        T.wait_until_ready(f"http://127.0.0.1:{port}", proc, log)
        for name, done in run_all(store_dir).items():
            if name == "reviewers":
                # a served store's reviewers are managed through the server, with the local admin credential
                # the server wrote for its own user (ragtrace_review.local_admin): it works instead of refusing
                assert done.returncode == 0 and "going through it" in done.stderr, (name, done.stderr)
                continue
            assert done.returncode == 2, (name, done.stderr)
            assert "in use by another process" in done.stderr, (name, done.stderr)
            # and only that: not the engine's own "Code: 76. DB::Exception: Cannot lock file" line first
            assert "DB::Exception" not in done.stderr and "Cannot lock file" not in done.stderr, (name, done.stderr)
    finally:
        proc.terminate()
        proc.wait(60)
