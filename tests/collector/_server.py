"""Run the collector app under a real uvicorn server on loopback, in a thread of the test process."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ragtrace_cli.server import build_app
from ragtrace_collector.settings import CollectorSettings
from tests.loopback import serving
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
    with serving(app, port=port, lifespan="on") as url:
        yield url, app
