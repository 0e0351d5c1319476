"""A collector that is down or silent: the first failed export says so at once with the endpoint,
shutdown is bounded (1 s by default, configurable) and says what it dropped, and `stats()` still
reads the counters afterwards. Real sockets on loopback: a port nobody listens on, and a server
that accepts connections and never answers."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import ragtrace
from ragtrace import _runtime
from ragtrace._config import ENV_SHUTDOWN_TIMEOUT_MS, Settings, resolve
from tests.otlp_builders import free_port


@ragtrace.retriever
def retrieve(query: str) -> list[str]:
    return ["a"]


@pytest.fixture
def silent() -> Iterator[str]:
    """The base URL of a server that accepts connections and never answers (a hung collector)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield f"http://127.0.0.1:{s.getsockname()[1]}"


def _wait_for(cond: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.01)  # waiting on another thread's log record; there is no event to wait on
    return False


def test_the_first_failed_export_warns_at_once_naming_the_endpoint(caplog: pytest.LogCaptureFixture) -> None:
    _runtime._last_logged.clear()
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    ragtrace.configure(endpoint=url, schedule_delay_ms=10, export_timeout_ms=30_000, max_export_batch=1)

    def warnings() -> list[logging.LogRecord]:
        return [r for r in caplog.records
                if r.levelno == logging.WARNING and "cannot export spans to" in r.getMessage()]

    with caplog.at_level(logging.WARNING, logger="ragtrace"):
        retrieve("q")
        assert _wait_for(lambda: bool(warnings()))
        # said while the export is still retrying (its 30 s budget has not run out), not when it gives up
        assert ragtrace.stats().export_requests == 0
        for i in range(3):
            retrieve(f"q{i}")
        ragtrace.shutdown(timeout_s=0.5)
    (first,) = warnings()
    assert f"{url}/v1/traces" in first.getMessage() and "ragtrace serve" in first.getMessage()
    assert "RAGTRACE_ENDPOINT" in first.getMessage()


def test_shutdown_is_bounded_says_what_it_dropped_and_stats_survive_it(silent: str,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    assert Settings().shutdown_timeout_s == 1.0
    ragtrace.configure(endpoint=silent, schedule_delay_ms=10)
    assert ragtrace.active_settings().shutdown_timeout_s == 1.0  # type: ignore[union-attr]
    for i in range(3):
        retrieve(f"q{i}")
    with caplog.at_level(logging.WARNING, logger="ragtrace"):
        # the collector never answers: shutdown returns anyway, within its bound
        assert ragtrace.shutdown() is False
    said = [r.getMessage() for r in caplog.records if "were not exported" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith(f"ragtrace: 3 spans of this run were not exported to {silent}")
    # the stopped configuration's counters, not zeros (the batch that was being sent is counted once
    # the worker sees the closed connection)
    assert _wait_for(lambda: ragtrace.stats().export_requests == 1)
    stats = ragtrace.stats()
    assert (stats.spans_exported, stats.dropped_export_failed + stats.dropped_at_shutdown, stats.spans_queued) == (
        0, 3, 0)
    assert ragtrace.active_settings() is None


def test_stats_survive_shutdown_until_the_next_configure(configure_memory: Any) -> None:
    configure_memory()
    retrieve("one")
    retrieve("two")
    assert ragtrace.shutdown() is True
    assert ragtrace.stats().spans_exported == 2 and ragtrace.stats().export_requests >= 1
    configure_memory()
    assert ragtrace.stats().spans_exported == 0


def test_the_shutdown_bound_is_configurable(monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve(shutdown_timeout_ms=250).shutdown_timeout_s == 0.25
    monkeypatch.setenv(ENV_SHUTDOWN_TIMEOUT_MS, "300")
    assert resolve().shutdown_timeout_s == 0.3


def test_a_process_pointed_at_a_hung_collector_exits_and_says_why(silent: str) -> None:
    code = ("import ragtrace\n"
            "ragtrace.configure(schedule_delay_ms=10)\n"
            "@ragtrace.pipeline\n"
            "def ask(q):\n"
            "    return q.upper()\n"
            "print(ask('hello'))\n")
    env = {**os.environ, "RAGTRACE_ENDPOINT": silent}
    # a hang would fail here (timeout); the exit itself runs ragtrace's bounded shutdown
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0 and proc.stdout == "HELLO\n"
    assert f"1 spans of this run were not exported to {silent}/v1/traces" in proc.stderr
