"""`ragtrace traces` and `ragtrace traces show`: stored queries, from the store or through a
running collector (``--server``).

Exit codes: 0 success, 1 nothing found or the collector refused, 2 usage error or a store that
cannot be used (`ragtrace_cli.commands.common`).
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import orjson

from ragtrace_cli.commands.common import EXIT_STORE, STORE_HELP, open_reader
from ragtrace_store import DEFAULT_TENANT, TraceFilter, TraceRecord, parse_time_bound
from ragtrace_store.traces import count_roots

#: how `traces show` names where a context came from (`TraceRecord.context_source`)
_CONTEXT_SOURCES = {"prompt": "read from the generation prompt", "reranker_top_k": "guessed: the reranker's top_k",
                    "reranked": "guessed: the reranked list", "retrieved": "guessed: the retrieved list"}


def traces_main(argv: list[str]) -> int:
    if argv and argv[0] == "show":
        return _traces_show(argv[1:])
    p = argparse.ArgumentParser(prog="ragtrace traces", description=(
        "List stored queries, newest first. `ragtrace traces show TRACE_ID` prints one with passage text."))
    _common_read_args(p)
    p.add_argument("--service")
    p.add_argument("--release")
    p.add_argument("--since", help="ISO time or an age such as 15m, 6h, 2d")
    p.add_argument("--until", help="ISO time or an age")
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--all", dest="include_all", action="store_true",
                   help="also list roots that are not queries (no retriever, reranker or LLM span under them: "
                        "a retriever or LLM called outside a chain, an index being built)")
    p.add_argument("--json", action="store_true", help="one JSON object per trace (JSON Lines)")
    a = p.parse_args(argv)
    try:
        since, until = parse_time_bound(a.since, "since"), parse_time_bound(a.until, "until")
    except ValueError as exc:
        p.error(str(exc))
    if a.limit <= 0:
        p.error("--limit must be > 0")
    others = 0
    if a.server:
        params: dict[str, Any] = {"limit": a.limit}
        if a.include_all:
            params["all"] = "true"
        for key, val in (("release", a.release), ("service", a.service), ("since", since), ("until", until)):
            if val is not None:
                params[key] = val.isoformat() if isinstance(val, datetime) else val
        rows = _fetch(a.server, "/api/traces", params, a.token)
        if rows is None:
            return 1
        objs = list(rows)
    else:
        store = open_reader(a.store, command="traces")
        if store is None:
            return EXIT_STORE
        with store:
            objs = [r.as_json() for r in store.read_traces(tenant=a.tenant, service=a.service, release=a.release,
                                                            since=since, until=until, limit=a.limit,
                                                            include_all=a.include_all)]
            if not a.include_all and not a.json:
                others = count_roots(store, TraceFilter(tenant=a.tenant, service=a.service, release=a.release,
                                                        since=since, until=until))["other"]
    if a.json:
        out = sys.stdout.buffer
        for obj in objs:
            out.write(orjson.dumps(obj) + b"\n")
        out.flush()
    else:
        _print_table(objs)
        if others:
            print(f"{others} other trace(s) have no retrieval, rerank or generation under their root and are not "
                  "queries (`--all` lists them)")
    return 0


def _common_read_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", help=STORE_HELP)
    p.add_argument("--tenant", default=DEFAULT_TENANT, help="tenant to read (direct store access only)")
    p.add_argument("--server", help="read through a running collector, e.g. http://127.0.0.1:4318 "
                                    "(needed while `ragtrace serve` owns an embedded store)")
    p.add_argument("--token", help="bearer token for --server (selects the tenant)")


def _fetch(server: str, path: str, params: dict[str, Any], token: str | None) -> Any:
    """The parsed answer of ``GET path`` (NDJSON: a list), or None once the error is printed."""
    from ragtrace_cli.remote import RemoteClient, RemoteError

    try:
        with RemoteClient(server, token=token, timeout=60) as remote:
            return remote.get(path, params)
    except RemoteError as exc:
        print(f"ragtrace traces: {exc}", file=sys.stderr)
        return None


def _short(text: str | None, width: int) -> str:
    if text is None:
        return "-"
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _print_table(objs: Iterable[dict[str, Any]]) -> None:
    objs = list(objs)
    if not objs:
        print("no traces (a trace appears once its root span has arrived)")
        return
    header = (f"{'trace_id':<32}  {'start (UTC)':<19}  {'release':<12}  {'P/R/C':>8}  {'gold':>4}  "
              f"{'state':<10}  query → answer")
    print(header)
    print("-" * len(header))
    for o in objs:
        start = (o.get("start_time") or "")[:19].replace("T", " ")
        counts = f"{len(o['retrieved'])}/{len(o['reranked'])}/{len(o['context'])}"
        print(f"{o['trace_id']:<32}  {start:<19}  {_short(o['release'], 12):<12}  {counts:>8}  "
              f"{len(o['gold_ids']):>4}  {_state(o):<10}  {_short(o['query'], 40)} → {_short(o['answer'], 40)}")
    print(f"\n{len(objs)} trace(s). P/R/C = retrieved / reranked / supplied context documents. state: ok, "
          "incomplete (lost attributes or a stage: not labelled; `ragtrace traces show` says why) or not-query.")


def _state(o: dict[str, Any]) -> str:
    if o.get("is_query") is False:
        return "not-query"
    return "incomplete" if o.get("complete") is False else "ok"


def _context_note(obj: dict[str, Any]) -> str:
    source = obj.get("context_source")
    if source in _CONTEXT_SOURCES:
        return f" ({_CONTEXT_SOURCES[source]})"
    return " (derived from top_k)" if obj.get("context_derived") else ""


def _traces_show(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="ragtrace traces show", description="One trace with passage text.")
    p.add_argument("trace_id")
    _common_read_args(p)
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    tid = a.trace_id.strip().lower()
    if a.server:
        obj = _fetch(a.server, f"/api/traces/{tid}", {}, a.token)
        if obj is None:
            return 1
    else:
        store = open_reader(a.store, command="traces")
        if store is None:
            return EXIT_STORE
        with store:
            found: list[TraceRecord] = list(store.read_traces(tenant=a.tenant, trace_ids=[tid], with_content=True,
                                                              include_all=True))
        if not found:
            print(f"ragtrace traces show: no trace {tid} in tenant {a.tenant!r} (or its root span has not "
                  "arrived yet)", file=sys.stderr)
            return 1
        obj = found[0].as_json(with_content=True)
    if a.json:
        print(orjson.dumps(obj).decode())
        return 0
    print(f"trace    {obj['trace_id']}   query id {obj['query_id'] or '-'}")
    print(f"service  {obj['service']}   release {obj['release']}   at {obj.get('start_time')}")
    print(f"query    {obj['query']}")
    print(f"answer   {obj['answer'] if obj['answer'] is not None else '-'}")
    print(f"gold     {', '.join(obj['gold_ids']) or '-'}")
    if obj.get("complete") is False:
        print("INCOMPLETE: this trace lost attributes or a stage; the audit does not label it:")
        for reason in obj.get("incomplete_reasons") or ():
            print(f"  - {reason}")
    titles = (("retrieved", "retrieved (candidate pool)"), ("reranked", "reranked"),
              ("context", "context supplied to the generator" + _context_note(obj)))
    for key, title in titles:
        docs = obj[key]
        print(f"\n== {title}: {len(docs)}")
        for d in docs:
            score = "-" if d["score"] is None else f"{d['score']:.4f}"
            print(f"  #{d['rank']:<3} {d['id']}  score {score}")
            if d.get("content"):
                print(textwrap.indent(textwrap.fill(d["content"], 100), "       "))
    return 0
