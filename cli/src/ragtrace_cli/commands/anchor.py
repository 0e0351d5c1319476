"""`ragtrace anchor set|show|clear`: pin the release or time window every periodic audit compares its
window with (drift against the anchor), per tenant and service.

    ragtrace anchor set --release v41 [--service qa]
    ragtrace anchor set --from 2026-05-01T00:00Z --to 2026-05-08T00:00Z [--service qa]
    ragtrace anchor show [--service qa] [--json]
    ragtrace anchor clear [--service qa]

Without --service the anchor is the tenant's, in force for every service without its own. With
--store the command writes the store directly (an embedded store only while no `ragtrace serve` has
it open); with --server it goes through the running `ragtrace serve`, whose token picks the tenant.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime
from typing import Any

from ragtrace_cli.commands.common import (
    ENV_TENANT_TOKEN,
    EXIT_STORE,
    STORE_HELP,
    decide_tenant,
    open_reader,
    printable,
    server_arg,
    tenant_arg,
)
from ragtrace_store import DEFAULT_TENANT, StoreError
from ragtrace_store.anchors import AnchorError, anchor_for, clear_anchor, list_anchors, set_anchor


def _aware_time(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an ISO 8601 time: e.g. 2026-05-01T00:00Z") from None
    if value.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} has no time zone: add one (Z for UTC, or +02:00)")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ragtrace anchor", description=(
        "Pin the release or time window that every periodic audit (ragtrace serve --audit-every) compares "
        "its window with: ragtrace_drift{against=\"anchor\"}."))
    sub = parser.add_subparsers(dest="action", required=True)
    set_p = sub.add_parser("set", help="pin a release, or a time window [--from, --to), as the anchor")
    form = set_p.add_mutually_exclusive_group(required=True)
    form.add_argument("--release", help="the release (service.version of the traces) to compare with")
    form.add_argument("--from", dest="start", type=_aware_time, metavar="TIME",
                      help="start of a time window (ISO 8601 with a zone); needs --to")
    set_p.add_argument("--to", dest="end", type=_aware_time, metavar="TIME", help="end of the time window (excluded)")
    show = sub.add_parser("show", help="print the anchors in force")
    show.add_argument("--json", action="store_true")
    clear = sub.add_parser("clear", help="remove an anchor (drift against the anchor becomes undefined)")
    for p in (set_p, show, clear):
        p.add_argument("--service", default=None,
                       help="the service (service.name) the anchor is for; default: every service of the tenant "
                            "without its own")
        p.add_argument("--store", default=None, help=STORE_HELP)
        p.add_argument("--tenant", default=None, type=tenant_arg,
                       help=f"tenant (direct store access only; default: {DEFAULT_TENANT})")
        p.add_argument("--server", type=server_arg, metavar="URL", default=None,
                       help="go through a running `ragtrace serve` at URL (its token picks the tenant)")
        p.add_argument("--token", default=None, help=f"the tenant's collector token for --server "
                                                     f"(default: ${ENV_TENANT_TOKEN})")
    return parser


def anchor_main(argv: list[str]) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    decide_tenant(parser, args)
    if args.action == "set":
        if args.release is not None and args.end is not None:
            parser.error("give --release or --from/--to, not both")
        if (args.start is None) != (args.end is None):
            parser.error("a time window needs both --from and --to")
    if args.server:
        if args.store:
            parser.error("give --store or --server, not both")
        return _remote(args, args.token or os.environ.get(ENV_TENANT_TOKEN))
    store = open_reader(args.store, command="anchor", locked=(
        "another process (a running `ragtrace serve`) has this embedded store open: go through it with "
        "--server http://HOST:PORT [--token TOKEN]"))
    if store is None:
        return EXIT_STORE
    with store:
        try:
            if args.action == "set":
                anchor = set_anchor(store, tenant=args.tenant, service=args.service or "", release=args.release,
                                    start=args.start, end=args.end)
                _say_set(anchor.to_json())
            elif args.action == "clear":
                _say_cleared(args.service or "", clear_anchor(store, tenant=args.tenant, service=args.service or ""))
            else:
                found = ([a for a in [anchor_for(store, tenant=args.tenant, service=args.service)] if a]
                         if args.service is not None else list_anchors(store, tenant=args.tenant))
                _show([a.to_json() for a in found], args.json)
        except (AnchorError, StoreError) as exc:
            print(f"ragtrace anchor: {exc}", file=sys.stderr)
            return 1
    return 0


def _remote(args: argparse.Namespace, token: str | None) -> int:
    from ragtrace_cli.remote import RemoteClient, RemoteError

    service = args.service or ""
    try:
        with RemoteClient(args.server, token=token, timeout=60) as remote:
            if args.action == "set":
                body = {"service": service, **({"release": args.release} if args.release is not None else
                                               {"from": args.start.isoformat(), "to": args.end.isoformat()})}
                _say_set(remote.post_json("/api/anchor", body))
            elif args.action == "clear":
                _say_cleared(service, bool(remote.post_json("/api/anchor/clear", {"service": service})["cleared"]))
            else:
                found = remote.get("/api/anchor")
                if args.service is not None:  # its own, else the tenant's (as anchor_for reads it)
                    found = ([a for a in found if a["service"] == args.service]
                             or [a for a in found if a["service"] == ""])
                _show(found, args.json)
    except RemoteError as exc:
        print(f"ragtrace anchor: {exc}", file=sys.stderr)
        return 1
    return 0


def _what(a: dict[str, Any]) -> str:
    return f"release {a['release']}" if a.get("release") is not None else f"{a['from']} to {a['to']}"


def _service(name: str) -> str:
    return f"service {printable(name)}" if name else "every service"


def _say_set(a: dict[str, Any]) -> None:
    print(f"anchor of {_service(a['service'])} (tenant {printable(a['tenant'])}): {printable(_what(a))}")


def _say_cleared(service: str, cleared: bool) -> None:
    print(f"anchor of {_service(service)} cleared" if cleared else f"{_service(service)} had no anchor of its own")


def _show(anchors: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        print(json.dumps(anchors))
        return
    for a in anchors:
        print(f"{_service(a['service']):<24} {printable(_what(a)):<50} set {a['set_at']}")
    if not anchors:
        print("no anchor; set one with `ragtrace anchor set --release RELEASE`", file=sys.stderr)
