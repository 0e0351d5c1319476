"""`ragtrace traces` and `ragtrace traces show`: stored queries, from the store or through a
running collector (``--server``).

Exit codes: 0 success, 1 nothing found or the collector refused, 2 usage error or a store that
cannot be used (`ragtrace_cli.commands.common`).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import textwrap
from datetime import datetime
from typing import Any

import orjson

from ragtrace_cli.commands.common import (
    ENV_TENANT_TOKEN,
    EXIT_STORE,
    STORE_HELP,
    TIME_HELP,
    decide_tenant,
    joined_ages,
    open_reader,
    printable,
    server_arg,
    tenant_arg,
)
from ragtrace_store import (
    DEFAULT_TENANT,
    EXACT_COUNT_ROWS,
    CursorError,
    TraceCount,
    TraceFilter,
    TraceListing,
    TraceRecord,
    count_traces,
    encode_cursor,
    parse_time_bound,
)

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
    p.add_argument("--since", help=TIME_HELP)
    p.add_argument("--until", help=TIME_HELP)
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--all", dest="include_all", action="store_true",
                   help="also list roots that are not queries (no retriever, reranker or LLM span under them: "
                        "a retriever or LLM called outside a chain, an index being built)")
    p.add_argument("--json", action="store_true", help="one JSON object per trace (JSON Lines)")
    p.add_argument("--cursor", help="continue a listing after its last page (the cursor printed under that page)")
    a = _parse(p, joined_ages(argv))
    try:
        since, until = parse_time_bound(a.since, "since"), parse_time_bound(a.until, "until")
    except ValueError as exc:
        p.error(str(exc))
    if since is not None and until is not None and since >= until:
        p.error(f"--since {since.isoformat()} is not before --until {until.isoformat()}: no trace can match; "
                "swap them (an age such as 2d means that long ago)")
    if a.limit <= 0:
        p.error("--limit must be > 0")
    flt = TraceFilter(tenant=a.tenant, service=a.service, release=a.release, since=since, until=until)
    out = _Output(as_json=a.json)
    # Traces are written as they are read (one page of the store at a time), so neither this
    # process nor the collector holds the listing, however long --limit makes it.
    if a.server:
        listing = _remote_listing(a, flt, out)
        if listing is None:
            return 1
        next_cursor, count = listing
    else:
        store = open_reader(a.store, command="traces")
        if store is None:
            return EXIT_STORE
        with store:
            try:
                rows = store.read_traces(tenant=a.tenant, service=a.service, release=a.release, since=since,
                                         until=until, limit=a.limit + 1, include_all=a.include_all, cursor=a.cursor)
                last = None
                for rec in rows:
                    if out.shown == a.limit:  # one more than shown: there is a next page
                        assert last is not None
                        out.more = True
                        break
                    out.write(rec.as_json())
                    last = rec
            except CursorError as exc:
                print(f"ragtrace traces: --cursor: {exc}", file=sys.stderr)
                return 2
            # the cursor of the listing read_traces read (`ragtrace_store.listing`)
            next_cursor = (encode_cursor(TraceListing(flt, include_all=a.include_all), last.start_time,
                                         last.trace_id) if out.more and last is not None else None)
            # the count says how many there are (a footer, not a scan: bounded, see count_traces)
            count = (count_traces(store, flt, include_all=a.include_all)
                     if next_cursor or a.cursor or not (a.json or a.include_all) else None)
    out.footer(limit=a.limit, count=count, next_command=_next_command(a, since, until, next_cursor),
               include_all=a.include_all, continued=a.cursor is not None, filters=_filters(a))
    return 0


def _filters(a: argparse.Namespace) -> str:
    """The filters a listing was given, as typed (empty without any): what an empty listing names."""
    given = [f"{flag} {value!r}" for flag, value in (("--service", a.service), ("--release", a.release),
                                                    ("--since", a.since), ("--until", a.until)) if value is not None]
    return ", ".join(given)


#: when a sent trace can be listed: the collector writes what it received in batches
_ARRIVAL = "a trace appears once its root span has arrived and the collector has written it, within a second or so"


class _Output:
    """The listing as it is read: JSON Lines, or the table (header before the first row)."""

    def __init__(self, *, as_json: bool) -> None:
        self.as_json, self.shown, self.more = as_json, 0, False

    def write(self, obj: dict[str, Any]) -> None:
        if self.as_json:
            sys.stdout.buffer.write(orjson.dumps(obj) + b"\n")
        else:
            if not self.shown:
                print(_HEADER)
                print("-" * len(_HEADER))
            print(printable(_row(obj)))
        self.shown += 1

    def footer(self, *, limit: int, count: TraceCount | None, next_command: str | None, include_all: bool,
               continued: bool, filters: str = "") -> None:
        if self.as_json:
            sys.stdout.buffer.flush()
            if next_command:  # stdout stays JSON Lines; the way on goes to stderr
                total = f" of {_total(count)}" if count else ""
                print(f"ragtrace traces: {self.shown}{total} trace(s) listed (--limit {limit}); next page: "
                      f"{next_command}", file=sys.stderr)
            elif not self.shown:  # an empty stdout, explained where the footer goes
                print(f"ragtrace traces: {_nothing(continued, filters)}", file=sys.stderr)
            return
        if not self.shown:
            print(_nothing(continued, filters))
            return
        what = "root(s)" if include_all else "trace(s)"
        if next_command:
            print(f"\n{self.shown} of {_total(count)} {what} shown, newest first (--limit {limit}). Next {limit}:\n"
                  f"  {next_command}\nor a larger --limit.")
        else:
            print(f"\n{self.shown} {what}{' (the last page)' if continued else ''}.")
        print("P/R/C = retrieved / reranked / supplied context documents. read: how the trace was read, not "
              "whether it failed: complete, incomplete (lost attributes or a stage: not labelled; `ragtrace "
              "traces show` says why) or not-query. Failures are the audit's labels (`ragtrace audit`).")
        if count is not None and count.others and not include_all:
            print(f"{count.others} other trace(s) have no retrieval, rerank or generation under their root and are "
                  "not queries (`--all` lists them)")


def _nothing(continued: bool, filters: str) -> str:
    """What an empty listing says."""
    if continued:
        return "no more traces after this cursor"
    if filters:  # most often a mistyped release or service: say which filters matched nothing
        return f"no traces match {filters} ({_ARRIVAL}; drop a filter to see what the store holds)"
    return f"no traces ({_ARRIVAL})"


def _total(count: TraceCount | None) -> str:
    if count is None:
        return "?"
    return f"{count.queries:,}" if count.exact else f"at most {count.queries:,} (root rows; counted exactly up to " \
        f"{EXACT_COUNT_ROWS:,})"


def _next_command(a: argparse.Namespace, since: datetime | None, until: datetime | None,
                  cursor: str | None) -> str | None:
    """The command that prints the next page: the same filters (relative times made absolute, which
    the cursor was made for) and the cursor."""
    if cursor is None:
        return None
    args = ["ragtrace", "traces"]
    for flag, value in (("--store", a.store), ("--server", a.server), ("--tenant", a.tenant if a.tenant !=
                        DEFAULT_TENANT else None), ("--service", a.service), ("--release", a.release),
                        ("--since", since.isoformat() if since else None),
                        ("--until", until.isoformat() if until else None), ("--limit", str(a.limit))):
        if value is not None:
            args += [flag, value]
    if a.include_all:
        args.append("--all")
    if a.json:
        args.append("--json")
    if a.token:
        args += ["--token", "TOKEN"]  # never echo a credential
    return shlex.join([*args, "--cursor", cursor])


def _remote_listing(a: argparse.Namespace, flt: TraceFilter,
                    out: _Output) -> tuple[str | None, TraceCount | None] | None:
    """Pages of /api/traces (at most `_PAGE` traces each, following its cursor) written to ``out``
    until --limit: (the next cursor, the count), or None once a refusal is printed."""
    from ragtrace_cli.remote import RemoteClient, RemoteError

    params: dict[str, Any] = {"all": "true"} if a.include_all else {}
    for key, val in (("release", a.release), ("service", a.service), ("since", flt.since), ("until", flt.until)):
        if val is not None:
            params[key] = val.isoformat() if isinstance(val, datetime) else val
    cursor, count = a.cursor, None
    try:
        with RemoteClient(a.server, token=_token(a), timeout=60, token_hint=_TOKEN_HINT) as remote:
            while out.shown < a.limit:
                page = {**params, "limit": min(_PAGE, a.limit - out.shown)}
                if cursor:
                    page["cursor"] = cursor
                if out.shown == 0:
                    page["total"] = "true"
                rows, headers = remote.get_page("/api/traces", page)
                if "ragtrace-total" in headers:
                    count = TraceCount(int(headers["ragtrace-total"]), None,
                                       headers.get("ragtrace-total-exact") == "true")
                for obj in rows or []:
                    out.write(obj)
                cursor = headers.get("ragtrace-next-cursor")
                if not cursor:
                    return None, count
    except RemoteError as exc:
        print(f"ragtrace traces: {exc}", file=sys.stderr)
        return None
    out.more = True
    return cursor, count


#: traces per request of `ragtrace traces --server` (the collector's PAGE_MAX)
_PAGE = 1000


_TOKEN_HINT = f"pass --token TOKEN or set ${ENV_TENANT_TOKEN}"


def _token(a: argparse.Namespace) -> str | None:
    """The bearer token for --server: --token, else $RAGTRACE_TOKEN (as `audit` and `reviewers` read it)."""
    return a.token or os.environ.get(ENV_TENANT_TOKEN) or None


def _parse(p: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    a = p.parse_args(argv)
    decide_tenant(p, a)
    return a


def _common_read_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", help=STORE_HELP)
    p.add_argument("--tenant", default=None, type=tenant_arg,
                   help=f"tenant to read (direct store access only; default {DEFAULT_TENANT})")
    p.add_argument("--server", type=server_arg, help="read through a running collector, e.g. http://127.0.0.1:4318 "
                                    "(needed while `ragtrace serve` owns an embedded store)")
    p.add_argument("--token", help=f"bearer token for --server (selects the tenant; default: ${ENV_TENANT_TOKEN})")


def _fetch(server: str, path: str, params: dict[str, Any], token: str | None) -> Any:
    """The parsed answer of ``GET path`` (NDJSON: a list), or None once the error is printed."""
    from ragtrace_cli.remote import RemoteClient, RemoteError

    try:
        with RemoteClient(server, token=token, timeout=60, token_hint=_TOKEN_HINT) as remote:
            return remote.get(path, params)
    except RemoteError as exc:
        print(f"ragtrace traces: {exc}", file=sys.stderr)
        return None


def _short(text: str | None, width: int) -> str:
    if text is None:
        return "-"
    text = printable(" ".join(text.split()))  # escaped before it is cut, so the columns line up
    return text if len(text) <= width else text[: width - 1] + "…"


_HEADER = (f"{'trace_id':<32}  {'start (UTC)':<19}  {'release':<12}  {'P/R/C':>8}  {'gold':>4}  "
           f"{'read':<10}  query → answer")


def _row(o: dict[str, Any]) -> str:
    start = (o.get("start_time") or "")[:19].replace("T", " ")
    counts = f"{len(o['retrieved'])}/{len(o['reranked'])}/{len(o['context'])}"
    return (f"{o['trace_id']:<32}  {start:<19}  {_short(o['release'], 12):<12}  {counts:>8}  "
            f"{len(o['gold_ids']):>4}  {_read_state(o):<10}  {_short(o['query'], 40)} → {_short(o['answer'], 40)}")


def _read_state(o: dict[str, Any]) -> str:
    """Whether the trace could be read whole (it says nothing about failure modes: those are labels)."""
    if o.get("is_query") is False:
        return "not-query"
    return "incomplete" if o.get("complete") is False else "complete"


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
    a = _parse(p, argv)
    tid = a.trace_id.strip().lower()
    if not tid:
        p.error("give the trace id to show (the first column of `ragtrace traces`)")
    if a.server:
        obj = _fetch(a.server, f"/api/traces/{tid}", {}, _token(a))
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

    def say(line: str) -> None:  # every field is the traced service's text
        print(printable(line))

    say(f"trace    {obj['trace_id']}   query id {obj['query_id'] or '-'}")
    say(f"service  {obj['service']}   release {obj['release']}   at {obj.get('start_time')}")
    say(f"query    {obj['query']}")
    say(f"answer   {obj['answer'] if obj['answer'] is not None else '-'}")
    gold = set(obj["gold_ids"])
    say(f"gold     {', '.join(obj['gold_ids']) or '-'}")
    # evidence spans (`TraceRecord.gold_evidence`): where the evidence is, and the chunk that holds it
    spans: dict[str, list[str]] = {}
    for e in obj.get("gold_evidence") or ():
        where = f"{e['source_id']}[{e['start']}:{e['end']}]"
        say(f"evidence {where}  " + (f"in {e['doc_id']}" if e["doc_id"] else "held by no candidate of this trace"))
        if e["doc_id"]:
            spans.setdefault(e["doc_id"], []).append(where)
    if obj.get("complete") is False:
        say("INCOMPLETE: this trace lost attributes or a stage; the audit does not label it:")
        for reason in obj.get("incomplete_reasons") or ():
            say(f"  - {reason}")
    titles = (("retrieved", "retrieved (candidate pool)"), ("reranked", "reranked"),
              ("context", "context supplied to the generator" + _context_note(obj)))
    for key, title in titles:
        docs = obj[key]
        say(f"\n== {title}: {len(docs)}")
        for d in docs:
            score = "-" if d["score"] is None else f"{d['score']:.4f}"
            # ranks from 1, as on the web pages (the JSON keeps the wire's 0-based rank)
            mark = ""
            if d["id"] in gold:
                mark = "  ★ gold" + "".join(f" {w}" for w in spans.get(d["id"], ()))
            say(f"  #{d['rank'] + 1:<3} {d['id']}  score {score}{mark}")
            if d.get("content"):
                print(textwrap.indent(textwrap.fill(printable(d["content"]), 100), "       "))
    return 0
