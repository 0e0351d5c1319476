"""Review fixtures: a fresh tenant per test on the shared chDB store, and a seeder of traces + labels."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterator, Sequence
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi import FastAPI

from ragtrace_review.web import mount
from ragtrace_store import Store
from tests.loopback import serving

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




@pytest.fixture
def live_url(store: Store) -> Iterator[str]:
    """The review UI on a real uvicorn server (loopback, a thread of this process) over the shared store."""
    app = FastAPI()
    mount(app, lambda: store, SimpleNamespace(review_secret="browser-test"))
    with serving(app) as url:
        yield url
