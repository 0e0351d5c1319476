"""The one HTTP client for ``--server`` mode: commands that go through a running ``ragtrace serve``.

An embedded store belongs to the process that has it open, so `ragtrace traces`, `ragtrace audit`,
`ragtrace review`, `ragtrace reviewers` (and the demo) reach it through the serving process's HTTP
API. They all talk to it through `RemoteClient`, so every one of them says the same thing when the
collector cannot be reached or refuses: a `RemoteError` whose message names what to do.

    with RemoteClient(args.server, token=args.token) as remote:
        traces = remote.get("/api/traces", {"limit": 10})  # NDJSON: a list of objects
"""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson

__all__ = ["TOKEN_HINT", "RemoteClient", "RemoteError", "collector_url_problem"]

#: what a 401 tells the user to do, unless the caller names its own option or variable
TOKEN_HINT = "pass --token TOKEN"
#: how much of an error response's body a message quotes
EXCERPT_CHARS = 500


def collector_url_problem(url: str) -> str | None:
    """What is wrong with ``url`` as the address of a collector (None when nothing is): checked
    before any request, since httpx would say "unsupported protocol 'localhost://'" for
    ``localhost:4318`` and fail only at the first request on a port that is not a number."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return (f"{url!r} is not a collector URL: give http://HOST:PORT or https://HOST:PORT "
                "(e.g. --server http://127.0.0.1:4318)")
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number or out of range
    except ValueError as exc:
        return f"{url!r}: {exc}; give http://HOST:PORT"
    return None


class RemoteError(Exception):
    """The collector could not be reached (``status`` None) or did not answer 2xx.

    ``str(exc)`` says what happened and what to do; ``detail`` is the server's own message (its
    JSON ``error`` field, or an excerpt of the body).
    """

    def __init__(self, message: str, *, url: str, status: int | None = None, detail: str = "") -> None:
        super().__init__(message)
        self.url = url
        self.status = status
        self.detail = detail


class RemoteClient:
    """A running ``ragtrace serve`` at ``base_url``: bearer ``token`` (optional), ``timeout`` seconds.

    `get` and `post_json` return the parsed body: a JSON value, or a list of the lines' values for an
    NDJSON (``application/x-ndjson``) answer. Anything but a 2xx answer raises `RemoteError`.
    ``token_hint`` is what a 401 tells the user (default: pass --token TOKEN).
    """

    def __init__(self, base_url: str, *, token: str | None = None, timeout: float = 60.0,
                 token_hint: str = TOKEN_HINT) -> None:
        problem = collector_url_problem(base_url)
        if problem is not None:
            raise RemoteError(problem, url=base_url)
        self.base_url = base_url.rstrip("/")
        self.token_hint = token_hint
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout)

    def __enter__(self) -> RemoteClient:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def get(self, path: str, params: Mapping[str, Any] | None = None, *,
            hints: Mapping[int, str] | None = None) -> Any:
        """``GET path?params``; ``hints`` add a status-specific remedy to the error message."""
        return self._request("GET", path, params=dict(params) if params else None, hints=hints)

    def get_page(self, path: str, params: Mapping[str, Any] | None = None) -> tuple[Any, Mapping[str, str]]:
        """``GET path?params`` and the response's headers (a listing's next cursor and total travel there)."""
        resp = self._send("GET", path, params=dict(params) if params else None, json=None, hints=None)
        return self._parsed(resp), resp.headers

    def post_json(self, path: str, body: Any = None, *, hints: Mapping[int, str] | None = None) -> Any:
        """``POST path`` with ``body`` as JSON (no body when None)."""
        return self._request("POST", path, json=body, hints=hints)

    def _request(self, method: str, path: str, *, params: dict[str, Any] | None = None, json: Any = None,
                 hints: Mapping[int, str] | None) -> Any:
        return self._parsed(self._send(method, path, params=params, json=json, hints=hints))

    def _send(self, method: str, path: str, *, params: dict[str, Any] | None, json: Any,
              hints: Mapping[int, str] | None) -> httpx.Response:
        url = self.base_url + path
        try:
            resp = self._http.request(method, path, params=params, json=json)
        except httpx.HTTPError as exc:
            raise RemoteError(f"cannot reach the collector at {self.base_url}: {str(exc) or type(exc).__name__}. "
                              "Is `ragtrace serve` running there?", url=url) from exc
        if not 200 <= resp.status_code < 300:
            detail = error_detail(resp)
            hint = (hints or {}).get(resp.status_code) or (self.token_hint if resp.status_code == 401 else "")
            raise RemoteError(f"the collector at {self.base_url} answered {resp.status_code}"
                              f"{f' ({hint})' if hint else ''}: {detail}",
                              url=url, status=resp.status_code, detail=detail)
        return resp

    def _parsed(self, resp: httpx.Response) -> Any:
        url = str(resp.request.url.copy_with(query=None))
        try:
            return parse_body(resp)
        except ValueError as exc:
            raise RemoteError(f"the collector at {self.base_url} answered {resp.status_code} with a body that is "
                              f"not JSON ({exc}); is {self.base_url} a `ragtrace serve`?", url=url,
                              status=resp.status_code, detail=resp.text[:EXCERPT_CHARS]) from exc


def parse_body(resp: httpx.Response) -> Any:
    """A response's JSON value, the list of its lines' values when it is NDJSON, else its text."""
    ctype = resp.headers.get("content-type", "")
    if "ndjson" in ctype or "jsonl" in ctype:
        # b"\n" only: a JSON Lines record ends there and nowhere else (orjson writes U+2028 unescaped)
        return [orjson.loads(line) for line in resp.content.split(b"\n") if line.strip()]
    if "json" in ctype and resp.content:
        return orjson.loads(resp.content)
    return resp.text or None


def error_detail(resp: httpx.Response) -> str:
    """The server's message in an error response: its JSON ``error`` field, else a body excerpt."""
    if "json" in resp.headers.get("content-type", ""):
        try:
            body = resp.json()
        except ValueError:
            body = None
        if isinstance(body, dict):
            return str(body.get("error", body))[:EXCERPT_CHARS * 4]
    text = resp.text.strip()
    return text[:EXCERPT_CHARS] + ("…" if len(text) > EXCERPT_CHARS else "") if text else "(empty body)"
