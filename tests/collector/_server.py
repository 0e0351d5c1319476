"""Run the collector app under a real uvicorn server on loopback, in a thread of the test process."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from ragtrace_cli.server import build_app
from ragtrace_collector.settings import CollectorSettings
from tests.otlp_builders import free_port

__all__ = ["free_port", "running"]



@contextmanager
def running(store: Any, spool_dir: str, **settings: Any) -> Iterator[tuple[str, Any]]:
    """Yields (base URL, app). The lifespan (writer start/stop) runs as under `ragtrace serve`.
    ``port`` (in ``settings``) picks the port; default any free one."""
    port = settings.pop("port", None) or free_port()
    cfg = CollectorSettings(store=store.location, port=port, spool_dir=spool_dir, spool_fsync=False,
                            batch_interval=settings.pop("batch_interval", 0.05), **settings)
    app = build_app(cfg, store)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}", app
    finally:
        server.should_exit = True
        thread.join(30)
