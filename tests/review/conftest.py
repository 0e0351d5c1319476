"""Review fixtures: a fresh tenant per test on the shared chDB store, and a seeder of traces + labels."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from ragtrace_collector.store import Store

from .rows import SAMPLE_CLAIMS, label_record, sample_trace, write_labels, write_trace


@pytest.fixture
def tenant() -> str:
    """A fresh tenant: tests share one store and isolate themselves by tenant."""
    return f"t-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def store(chdb_store: Store) -> Store:
    return chdb_store


@pytest.fixture
def seeded(store: Store, tenant: str) -> Callable[..., list[dict[str, Any]]]:
    """Write n traces with labels of the given modes; returns the label records."""
    counter = itertools.count()

    def make(modes: Sequence[str], *, hostile: bool = False, confidence: float = 0.9,
             manifest_id: str = "m-test") -> list[dict[str, Any]]:
        records = []
        for mode in modes:
            # ids keep counting across calls, so a second call adds new traces
            tid = f"{tenant}-tr{next(counter):03d}"
            write_trace(store, tenant, sample_trace(tid, hostile=hostile))
            records.append(label_record(tid, mode, confidence=confidence, manifest_id=manifest_id,
                                        claims=SAMPLE_CLAIMS, query_id=f"q-{tid}"))
        write_labels(store, tenant, records)
        return records

    return make
