"""Fixtures of the examples tests: a real `ragtrace serve` in a child process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def example_collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL of `ragtrace serve` on a fresh embedded store, owned by a child process (the test
    process never opens an embedded store itself, so it does not collide with other tests' stores)."""
    from ragtrace_examples.demo import Collector, _free_port

    folder: Path = tmp_path_factory.mktemp("example-collector")
    collector = Collector(folder / "store", _free_port(), folder / "collector.log")
    collector.start()
    try:
        yield collector.url
    finally:
        collector.stop()
