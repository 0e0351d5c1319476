"""Review fixtures: a fresh tenant per test on the shared chDB store, and a seeder of traces + labels."""

from __future__ import annotations

import itertools
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI

from ragtrace_review.web import mount
from ragtrace_store import Store

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


@contextmanager
def serving(app: FastAPI) -> Iterator[str]:
    """``app`` on a real uvicorn server (loopback, a thread of this process); yields its base URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture
def live_url(store: Store) -> Iterator[str]:
    """The review UI on a real uvicorn server (loopback, a thread of this process) over the shared store."""
    app = FastAPI()
    mount(app, lambda: store, SimpleNamespace(review_secret="browser-test"))
    with serving(app) as url:
        yield url
