"""Shared fixtures. Append only; name fixtures clearly."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

if os.environ.get("PYTEST_XDIST_WORKER"):
    # `make test` runs two xdist workers on two cores: one intra-op thread each (torch, and the
    # child processes the tests start), or the spinning thread pools of both workers fight for the
    # same cores (tiny models ran ~5x slower that way, see tests/labellers/test_relevance_correlation.py)
    os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def chdb_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The one embedded chDB store of this test process (migrated).

    Embedded chDB allows one data directory per process, so every test that needs an embedded
    store shares this one and isolates itself by tenant (or unique service/release names).
    """
    from ragtrace_store import open_store

    path: Path = tmp_path_factory.mktemp("chdb-store")
    store = open_store(str(path), migrate=True)
    try:
        yield store
    finally:
        store.close()


@pytest.fixture(scope="session")
def chdb_http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL (``http://default:@127.0.0.1:PORT/ragtrace``) of a ClickHouse HTTP interface served
    by chDB in a separate process (tests/chdb_http.py); usable as a store URL by any process."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from chdb_http import ChdbHttpServer

    server = ChdbHttpServer(tmp_path_factory.mktemp("chdb-http"))
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.hookimpl(trylast=True)  # after `-m` / `-k` have deselected what they leave out
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without the browser the run stops here, with one error that says how to install it, rather
    than failing or skipping each browser test on its own."""
    from tests.browser import CHROMIUM, MISSING

    n = sum(1 for item in items if item.get_closest_marker("browser"))
    if not n or config.option.collectonly or CHROMIUM.exists():
        return
    missing = MISSING.format(n=n, path=CHROMIUM)
    workeroutput = getattr(config, "workeroutput", None)
    if workeroutput is None:
        raise pytest.UsageError(missing)
    # An xdist worker (`pytest -n`): an error raised here reads as a crashed worker, so the worker
    # runs nothing and hands the message to the controller, which stops the run with it (below).
    workeroutput["missing_browser"] = missing
    items.clear()


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook, called in the controller as a worker ends
def pytest_testnodedown(node: Any, error: object) -> None:
    missing = getattr(node, "workeroutput", {}).get("missing_browser")
    if missing:
        raise pytest.UsageError(missing)


#: the test files that load SmolLM2 in the test process: under `--dist loadfile` they run as one unit
#: on one worker, so the model is loaded once there (`ragtrace_evaluator.labellers.causal_lm` keeps it),
#: not once per file (~15 s of CPU each); tests/test_conftest_scheduling.py keeps the list complete
LOADS_SMOLLM2 = ("tests/examples/test_smollm2_generator.py", "tests/labellers/test_llm_judge.py",
                 "tests/labellers/test_relevance.py", "tests/labellers/test_relevance_correlation.py")


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook, called in the controller
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadfile` with the files of `LOADS_SMOLLM2` as one work unit; any other mode as xdist has it."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class FilesSharingAModel(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = super()._split_scope(nodeid)
            return "SmolLM2 files" if path in LOADS_SMOLLM2 else path

    return FilesSharingAModel(config, log)
