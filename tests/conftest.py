"""Shared fixtures. Append only; name fixtures clearly."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def chdb_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The one embedded chDB store of this test process (migrated).

    Embedded chDB allows one data directory per process, so every test that needs an embedded
    store shares this one and isolates itself by tenant (or unique service/release names).
    """
    from ragtrace_collector.store import open_store

    path: Path = tmp_path_factory.mktemp("chdb-store")
    store = open_store(str(path), migrate=True)
    try:
        yield store
    finally:
        store.close()
