"""A `ragtrace serve` child process on loopback and raw-socket helpers, for the load and
connection fault tests (the real server with the uvicorn configuration `ragtrace serve` uses)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx

from tests import otlp_builders as T

RAGTRACE = str(Path(sys.executable).with_name("ragtrace"))


@contextlib.contextmanager
def serve(tmp: Path, *args: str, preexec: Callable[[], None] | None = None) -> Iterator[tuple[str, int, Path, int]]:
    """Yields (base URL, port, log path, pid); SIGTERM and wait at the end."""
    port = T.free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp / f"serve-{port}.log"
    proc = subprocess.Popen([RAGTRACE, "serve", "--store", str(tmp / f"store-{port}"), "--port", str(port),
                             "--spool-dir", str(tmp / f"spool-{port}"), "--no-fsync", *args],
                            stdout=log.open("wb"), stderr=subprocess.STDOUT, preexec_fn=preexec)
    try:
        T.wait_until_ready(url, proc, log)
        yield url, port, log, proc.pid
    finally:
        T.stop_child(proc, 60)


def metric(url: str, name: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=30).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))


def connect(port: int, data: bytes = b"") -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    if data:
        s.sendall(data)
    return s


def read_until_closed(s: socket.socket, timeout: float) -> tuple[bytes, bool]:
    """What the server sends until it closes the connection: (bytes, closed within ``timeout``)."""
    s.settimeout(timeout)
    out = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return out, True
            out += chunk
    except TimeoutError:
        return out, False
    except ConnectionResetError:
        return out, True


def headers(content_length: int | None, *, path: str = "/v1/traces") -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/x-protobuf"]
    if content_length is not None:
        lines.append(f"Content-Length: {content_length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout:.0f} s")
        time.sleep(0.05)  # polling another process
