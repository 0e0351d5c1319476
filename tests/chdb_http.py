"""A ClickHouse HTTP-interface server backed by embedded chDB, for tests (its own process).

No modern ClickHouse server can be installed on this machine, so the HTTP path is tested
against the real engine (chDB) behind ClickHouse's HTTP protocol: the unmodified
clickhouse-connect HTTP client talks to it exactly as it talks to a server. Collector, store and
readers can then be separate processes, as in production.

What it implements of the protocol: ``GET /ping``; ``GET|POST /?query=...`` with the statement in
the ``query`` parameter and/or the body (concatenated, as ClickHouse does), ``param_*`` bind
parameters, ``database``; the query and its parameters as ``multipart/form-data`` fields (what
clickhouse-connect sends when they do not fit in a URL); request bodies compressed with gzip,
deflate, zstd or lz4 (several concatenated frames allowed); inserts whose data follows ``FORMAT
<fmt>`` in the body (run as ``INSERT ... FROM INFILE``, the way chDB ingests external data); errors
as HTTP 500 with ``X-ClickHouse-Exception-Code``. Transport parameters (``query_id``,
``wait_end_of_query``, ...) are accepted and ignored.

Run: ``python tests/chdb_http.py --path DIR --port PORT`` (prints ``READY <port>`` when serving).
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

_INSERT_DATA = re.compile(rb"^\s*INSERT\s+INTO\s+.*?\bFORMAT\s+(\w+)[ \t]*\r?\n?", re.I | re.S)
_IGNORED = {"query", "database", "query_id", "session_id", "session_timeout", "wait_end_of_query",
            "send_progress_in_http_headers", "http_headers_progress_interval_ms", "enable_http_compression",
            "client_protocol_version", "default_format", "user", "password", "compress", "decompress"}


def _decompress(body: bytes, encoding: str) -> bytes:
    enc = encoding.strip().lower()
    if enc in ("", "identity"):
        return body
    if enc == "gzip":
        return gzip.decompress(body)
    if enc == "deflate":
        return zlib.decompress(body)
    if enc == "zstd":
        import zstandard

        out, data = [], body
        while data:
            d = zstandard.ZstdDecompressor().decompressobj()
            out.append(d.decompress(data))
            data = d.unused_data
        return b"".join(out)
    if enc == "lz4":
        import lz4.frame

        out, data = [], body
        while data:
            d = lz4.frame.LZ4FrameDecompressor()
            out.append(d.decompress(data))
            data = d.unused_data
        return b"".join(out)
    raise ValueError(f"unsupported Content-Encoding {encoding!r}")


class _Engine:
    """The chDB connection; one statement at a time (chDB connections are not concurrent)."""

    def __init__(self, path: str) -> None:
        import chdb

        self.conn = chdb.connect(os.path.realpath(path))
        self.lock = threading.Lock()
        self.tmp = tempfile.mkdtemp(prefix="chdb-http-")

    def run(self, sql: bytes, data: bytes | None, fmt: str | None, params: dict[str, str],
            database: str | None) -> bytes:
        with self.lock:
            if database:
                self.conn.query(f"USE `{database}`", "TabSeparated")
            if data is None:
                result = self.conn.query(sql.decode("utf-8"), "TabSeparated", params=params)
                return result.bytes() or b""
            path = os.path.join(self.tmp, f"insert-{threading.get_ident()}.{(fmt or 'bin').lower()}")
            with open(path, "wb") as fh:
                fh.write(data)
            try:
                head = sql.decode("utf-8")
                stmt = re.sub(r"\bFORMAT\s+\w+\s*$", "", head.strip(), flags=re.I)
                self.conn.query(f"{stmt} FROM INFILE '{path}' FORMAT {fmt}", "TabSeparated", params=params)
            finally:
                os.unlink(path)
            return b""


def _form_fields(ctype: str, body: bytes) -> dict[str, str]:
    """The text fields of a multipart/form-data body."""
    from email.parser import BytesParser
    from email.policy import HTTP

    msg = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {ctype}\r\n\r\n".encode() + body)
    out = {}
    for part in msg.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if name and not part.get_filename():
            payload = part.get_payload(decode=True) or b""
            out[str(name)] = payload.decode("utf-8")
    return out


def make_handler(engine: _Engine) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # quiet
            pass

        def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("X-ClickHouse-Timezone", "UTC")
            self.send_header("X-ClickHouse-Server-Display-Name", "chdb-http")
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            if url.path in ("/ping", "/") and "query=" not in (url.query or ""):
                self._send(200, b"Ok.\n")
                return
            self._handle(b"")

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                body = self._read_chunked()
            else:
                body = self.rfile.read(length) if length else b""
            self._handle(body)

        def _read_chunked(self) -> bytes:
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()

        def _handle(self, body: bytes) -> None:
            url = urlsplit(self.path)
            qs = dict(parse_qsl(url.query, keep_blank_values=True))
            try:
                body = _decompress(body, self.headers.get("Content-Encoding", ""))
            except Exception as exc:
                self._error(400, f"cannot decompress the body: {exc}")
                return
            ctype = self.headers.get("Content-Type", "")
            if ctype.startswith("multipart/form-data"):
                # clickhouse-connect sends the query and its parameters as form fields once they no
                # longer fit in a URL (as ClickHouse's HTTP interface accepts them)
                qs.update(_form_fields(ctype, body))
                body = b""
            query = qs.get("query", "").encode()
            full = query + (b"\n" if query and body else b"") + body
            params = {k[6:]: v for k, v in qs.items() if k.startswith("param_")}
            data: bytes | None = None
            fmt: str | None = None
            m = _INSERT_DATA.match(full)
            if m:
                fmt = m.group(1).decode()
                data = full[m.end():]
                full = full[: m.end()]
            try:
                out = engine.run(full, data, fmt, params, qs.get("database"))
            except Exception as exc:
                self._error(500, str(exc))
                return
            self._send(200, out, {"X-ClickHouse-Summary": '{"read_rows":"0","written_rows":"0"}'})

        def _error(self, status: int, message: str) -> None:
            m = re.search(r"Code:\s*(\d+)", message)
            code = m.group(1) if m else "1000"
            text = message if message.startswith("Code:") else f"Code: {code}. DB::Exception: {message}"
            self._send(status, text.encode("utf-8", "replace"), {"X-ClickHouse-Exception-Code": code})

    return Handler


def serve(path: str, host: str, port: int) -> None:
    engine = _Engine(path)
    server = ThreadingHTTPServer((host, port), make_handler(engine))
    server.daemon_threads = True

    def stop(*_: object) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    print(f"READY {server.server_address[1]}", flush=True)
    try:
        server.serve_forever(poll_interval=0.1)
    finally:
        server.server_close()
        engine.conn.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ChdbHttpServer:
    """Runs `serve` in a child process; `stop`/`kill`/`start` simulate store outages."""

    def __init__(self, path: str | os.PathLike[str], port: int | None = None) -> None:
        self.path = str(path)
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://default:@127.0.0.1:{self.port}/ragtrace"

    def start(self, timeout: float = 60.0) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--path", self.path, "--port", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                raise RuntimeError(f"chdb_http exited with {self.proc.returncode}: {err[-2000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/ping", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"chdb_http did not answer on port {self.port} within {timeout}s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


def main() -> None:
    ap = argparse.ArgumentParser(description="ClickHouse HTTP interface over embedded chDB (tests only)")
    ap.add_argument("--path", required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    a = ap.parse_args()
    serve(a.path, a.host, a.port)


if __name__ == "__main__":
    main()
