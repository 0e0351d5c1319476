"""An ASGI app on a real uvicorn server on loopback, in a thread of the test process.

The tests that need HTTP for real (the collector, the review pages, the SDK's middleware, a local
chat server for the LLM judge) share this one way of starting and stopping it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

import uvicorn

from tests.otlp_builders import free_port


@contextmanager
def serving(app: Any, *, port: int | None = None, lifespan: Literal["auto", "on", "off"] = "auto",
            start_timeout: float = 30.0) -> Iterator[str]:
    """Yields the base URL once uvicorn has started; stops the server (and waits for it) on exit."""
    port = port or free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           lifespan=lifespan))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            server.should_exit = True
            raise RuntimeError(f"uvicorn did not start on 127.0.0.1:{port}")
        time.sleep(0.02)  # uvicorn offers no start event to wait on: poll its `started` flag
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
