"""`ragtrace reviewers ...` and `ragtrace review ...`.

Both take ``--store`` (a directory or a ClickHouse URL; default $RAGTRACE_STORE or the per-user
store) and ``--tenant``. The functions accept an already open store for callers that own one
(tests, the serving process), since an embedded store allows one process at a time. They never
change the schema; exit codes as in every command (`ragtrace_cli.commands.common`): 1 a review
error, 2 a usage error or a store that cannot be used.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

from ragtrace_cli.commands.common import (
    ENV_TENANT_TOKEN,
    EXIT_STORE,
    decide_tenant,
    open_reader,
    server_arg,
    tenant_arg,
)
from ragtrace_review import auth
from ragtrace_review.calibrate import agreement_report, export_gold, render_text, write_gold
from ragtrace_review.errors import ReviewError
from ragtrace_review.local_admin import LocalCredential, read_credential
from ragtrace_review.queues import enqueue, progress, queue_names
from ragtrace_store import (
    DEFAULT_TENANT,
    LabelError,
    Store,
    StoreError,
    default_store_path,
    is_server_url,
    read_label_lines,
)

ENV_TOKEN = "RAGTRACE_REVIEW_TOKEN"


def _common(p: argparse.ArgumentParser, *, server: bool = False) -> None:
    p.add_argument("--store", default=None,
                   help="store directory or http(s)://user:pw@host:8123/db (default: $RAGTRACE_STORE)")
    p.add_argument("--tenant", default=None, type=tenant_arg,
                   help=f"tenant (direct store access only; default: {DEFAULT_TENANT})")
    if server:
        # An embedded store belongs to the `ragtrace serve` process that has it open; these
        # commands can go through that server instead, as a reviewer of the token's tenant.
        p.add_argument("--server", type=server_arg, metavar="URL", default=None,
                       help="go through a running `ragtrace serve` at URL instead of opening the store")
        p.add_argument("--token", default=None, help=f"reviewer token for --server (default: ${ENV_TOKEN})")


def _run(args: argparse.Namespace, store: Store | None, body: Callable[[Store], int], command: str) -> int:
    if store is None:
        # never migrates: the schema is `ragtrace store migrate`'s (or `ragtrace serve`'s) to change
        store = open_reader(args.store, command=command)
        if store is None:
            return EXIT_STORE
        with store:
            return _run(args, store, body, command)
    try:
        return body(store)
    except (ReviewError, StoreError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def reviewers_main(argv: list[str], store: Store | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ragtrace reviewers", description="Manage human reviewers.")
    sub = parser.add_subparsers(dest="action", required=True)
    add = sub.add_parser("add", help="create a reviewer; prints their login token as the last line")
    add.add_argument("name")
    add.add_argument("--role", choices=auth.ROLES, default=auth.ROLE_REVIEWER,
                     help="reviewer: labels queue items (default); viewer: may log in and read traces, "
                          "the dashboard and queue progress, but not review")
    _common(add)
    ls = sub.add_parser("list", help="list reviewers")
    ls.add_argument("--json", action="store_true")
    ls.add_argument("--all-tenants", action="store_true")
    _common(ls)
    dis = sub.add_parser("disable", help="disable a reviewer (ends their sessions)")
    dis.add_argument("name", help="reviewer name or id")
    _common(dis)
    en = sub.add_parser("enable", help="re-enable a disabled reviewer")
    en.add_argument("name", help="reviewer name or id")
    _common(en)
    for sp in (add, ls, dis, en):
        sp.add_argument("--server", type=server_arg, metavar="URL", default=None,
                        help="manage reviewers through a running `ragtrace serve` at URL")
        sp.add_argument("--token", default=None,
                        help=f"the tenant's collector token for --server (default: ${ENV_TENANT_TOKEN})")
    args = parser.parse_args(argv)
    decide_tenant(parser, args)
    if args.server:
        if args.store:
            parser.error("give --store or --server, not both")
        if getattr(args, "all_tenants", False):  # else it would list the token's tenant as if it were all
            parser.error("--all-tenants needs direct store access (--store); through --server a token "
                         "manages its own tenant's reviewers only")
        token = args.token or os.environ.get(ENV_TENANT_TOKEN)
        if not token:  # the server's local admin credential, when this user runs it on this machine
            try:
                credential = _local_credential(None)
            except ReviewError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 1
            token = credential.token if credential is not None and credential.serves(args.server) else None
        return _remote_reviewers(args, token)
    if store is None and args.tenant == DEFAULT_TENANT and not getattr(args, "all_tenants", False):
        # the store is owned by a running `ragtrace serve`: go through it with its local admin credential
        # rather than answer that the store is in use (and the server, that it needs a token)
        try:
            credential = _local_credential(args.store)
        except ReviewError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        if credential is not None and _running(credential.pid):
            print(f"the store is served by `ragtrace serve` (pid {credential.pid}) at {credential.url}: going "
                  f"through it with its local admin credential ({credential.path})", file=sys.stderr)
            args.server = credential.url
            return _remote_reviewers(args, credential.token)

    def body(st: Store) -> int:
        if args.action == "add":
            reviewer, token = auth.add_reviewer(st, args.name, tenant=args.tenant, role=args.role)
            print(f"{reviewer.role} {reviewer.name} (id {reviewer.reviewer_id}, tenant {reviewer.tenant}) created.")
            print("Log in at /review/login with this token; it is shown only now and stored only as a hash:")
            print(token)
            return 0
        if args.action == "list":
            rows = auth.list_reviewers(st, tenant=None if args.all_tenants else args.tenant)
            if args.json:
                print(json.dumps([{"reviewer_id": r.reviewer_id, "name": r.name, "tenant": r.tenant,
                                   "disabled": r.disabled, "created_at": r.created_at.isoformat(), "role": r.role}
                                  for r in rows]))
                return 0
            for r in rows:
                state = "disabled" if r.disabled else "active"
                print(f"{r.reviewer_id}  {r.tenant:<12} {state:<8}  {r.role:<8}  {r.name}")
            if not rows:
                print("no reviewers; add one with `ragtrace reviewers add NAME`", file=sys.stderr)
            return 0
        reviewer = auth.find_reviewer(st, args.name, tenant=args.tenant)
        auth.set_disabled(st, reviewer, args.action == "disable")
        print(f"reviewer {reviewer.name} {'disabled' if args.action == 'disable' else 'enabled'}")
        return 0

    return _run(args, store, body, "reviewers")


def _local_credential(store: str | None) -> LocalCredential | None:
    """The local admin credential a `ragtrace serve` of this user left in the embedded store
    ``store`` (default: the per-user store); None for a server URL or when there is none."""
    location = store or str(default_store_path())
    if is_server_url(location) or "://" in location:
        return None
    return read_credential(Path(location))


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def _remote_reviewers(args: argparse.Namespace, token: str | None) -> int:
    from ragtrace_cli.remote import RemoteClient, RemoteError

    base = "/api/reviewers"
    try:
        with RemoteClient(args.server, token=token, timeout=60,
                          token_hint=f"pass the tenant's collector token (or the server's RAGTRACE_ADMIN_TOKEN "
                                     f"when it has no tenant tokens): --token TOKEN or ${ENV_TENANT_TOKEN}",
                          ) as remote:
            if args.action == "add":
                data = remote.post_json(base, {"name": args.name, "role": args.role})
            elif args.action == "list":
                data = remote.get(base)
            else:
                data = remote.post_json(f"{base}/{quote(args.name, safe='')}/{args.action}")
    except RemoteError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.action == "add":
        print(f"{data.get('role', 'reviewer')} {data['name']} (id {data['reviewer_id']}, tenant {data['tenant']}) "
              "created.")
        print("Log in at /review/login with this token; it is shown only now and stored only as a hash:")
        print(data["token"])
    elif args.action == "list":
        if args.json:
            print(json.dumps(data))
        for rv in [] if args.json else data:
            print(f"{rv['reviewer_id']}  {rv['tenant']:<12} {'disabled' if rv['disabled'] else 'active':<8}  "
                  f"{rv.get('role', 'reviewer'):<8}  {rv['name']}")
        if not data and not args.json:  # as with --store: an empty listing says so
            print("no reviewers; add one with `ragtrace reviewers add NAME`", file=sys.stderr)
    else:
        print(f"reviewer {data['name']} {'disabled' if data['disabled'] else 'enabled'}")
    return 0


def _remote(args: argparse.Namespace, token: str) -> int:
    """`ragtrace review ... --server URL`: the same actions through the review JSON API."""
    from ragtrace_cli.remote import RemoteClient, RemoteError

    base = "/review/api"
    try:
        with RemoteClient(args.server, token=token, timeout=600,
                          token_hint=f"pass a reviewer token: --token TOKEN or ${ENV_TOKEN}") as remote:
            if args.action == "enqueue":
                body: dict[str, object] = {"per_mode": args.per_mode, "reviewers": args.reviewers,
                                           "low_confidence": args.low_confidence, "description": args.description}
                for key, value in (("manifest_id", args.manifest), ("release", args.release),
                                   ("service", args.service)):
                    if value is not None:
                        body[key] = value
                if args.labels is not None:
                    body["labels"] = [rec.to_json() for rec in read_label_lines(args.labels)]
                data = remote.post_json(f"{base}/queues/{quote(args.queue, safe='')}/enqueue", body)
            elif args.action == "agreement":
                data = remote.get(f"{base}/queues/{quote(args.queue, safe='')}/agreement")
            elif args.action == "status":
                data = remote.get(f"{base}/queues")
            else:
                data = remote.get(f"{base}/queues/{quote(args.queue, safe='')}/export")
                if args.to_store:
                    stored = remote.post_json(f"{base}/queues/{quote(args.queue, safe='')}/gold")
                    data["stored"] = stored["stored"]
    except (RemoteError, LabelError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.action == "enqueue":
        parts = ", ".join(f"{k}: {v}" for k, v in data["added"].items()) or "nothing new"
        print(f"queue {data['queue']}: added {sum(data['added'].values())} of {data['candidates']} labelled traces "
              f"({parts}); {data['already_queued']} were already queued; K={data['reviewers_per_item']}")
    elif args.action == "agreement":
        print(json.dumps(data, indent=2) if args.json else render_text(data))
    elif args.action == "status":
        if args.json:
            print(json.dumps(data["queues"]))
        for q in [] if args.json else data["queues"]:
            who = ", ".join(f"{r['name']} {r['decided']}" for r in q["reviewers"]) or "nobody yet"
            print(f"{q['queue']}: {q['decisions']}/{q['target']} decisions, {q['complete']} of {q['items']} items "
                  f"complete, K={q['reviewers_per_item']}; {who}")
        if not data["queues"] and not args.json:  # as with --store: an empty status says so
            print(f"no review queues in tenant {data.get('tenant', '?')!r}", file=sys.stderr)
    else:
        write_gold(data["records"], data["qrels"], args.out)
        stored = f"; stored {data['stored']} gold rows" if args.to_store else ""  # as with --store
        print(f"wrote {len(data['records'])} reviewed items to {args.out / 'reviews.jsonl'} and "
              f"{len(data['qrels'])} judgements to {args.out / 'qrels.txt'}{stored}")
    return 0


def review_main(argv: list[str], store: Store | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ragtrace review", description="Human review queues.")
    sub = parser.add_subparsers(dest="action", required=True)
    enq = sub.add_parser("enqueue", help="put flagged, labelled traces into a queue")
    enq.add_argument("--queue", required=True)
    enq.add_argument("--manifest", default=None, help="labeller manifest id (default: the latest)")
    enq.add_argument("--labels", type=Path, default=None,
                     help="per-trace label JSON Lines (from `ragtrace audit --per-trace`) instead of the store")
    enq.add_argument("--per-mode", type=int, default=20, help="cap per stratum (default: %(default)s)")
    enq.add_argument("--reviewers", type=int, default=2, help="K distinct reviewers per item (default: %(default)s)")
    enq.add_argument("--low-confidence", type=float, default=0.6,
                     help="flag labels below this confidence (default: %(default)s)")
    enq.add_argument("--release", default=None)
    enq.add_argument("--service", default=None)
    enq.add_argument("--description", default="")
    _common(enq, server=True)
    agr = sub.add_parser("agreement", help="reviewer agreement and labeller calibration of a queue")
    agr.add_argument("--queue", required=True)
    agr.add_argument("--json", action="store_true")
    agr.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: %(default)s)")
    _common(agr, server=True)
    sts = sub.add_parser("status", help="progress of every queue, per reviewer")
    sts.add_argument("--json", action="store_true")
    _common(sts, server=True)
    exp = sub.add_parser("export", help="write reviewed items as gold data (JSON Lines + TREC qrels)")
    exp.add_argument("--queue", required=True)
    exp.add_argument("--out", type=Path, required=True)
    exp.add_argument("--to-store", action="store_true",
                     help="also store the relevance judgements as gold (source 'review') for later audits")
    _common(exp, server=True)
    args = parser.parse_args(argv)
    decide_tenant(parser, args, f"--token or ${ENV_TOKEN}")

    if args.action == "enqueue" and args.labels is not None and not args.labels.is_file():
        parser.error(f"--labels {args.labels}: no such file")
    if args.action == "export" and args.out.exists() and not args.out.is_dir():
        parser.error(f"--out {args.out}: is a file; give a directory (reviews.jsonl and qrels.txt go in it)")
    if args.server:
        if args.store:
            parser.error("give --store or --server, not both")
        token = args.token or os.environ.get(ENV_TOKEN)
        if not token:
            parser.error(f"--server needs a reviewer token: --token TOKEN or ${ENV_TOKEN}")
        return _remote(args, token)

    def body(st: Store) -> int:
        if args.action == "enqueue":
            labels = None
            if args.labels is not None:
                labels = [rec.to_json() for rec in read_label_lines(args.labels)]
            res = enqueue(st, args.queue, labels, args.per_mode, args.reviewers, tenant=args.tenant,
                          manifest_id=args.manifest, low_confidence=args.low_confidence, release=args.release,
                          service=args.service, description=args.description)
            parts = ", ".join(f"{k}: {v}" for k, v in res.added.items()) or "nothing new"
            print(f"queue {res.queue}: added {res.total_added} of {res.candidates} labelled traces ({parts}); "
                  f"{res.already_queued} were already queued; K={res.reviewers_per_item}")
            return 0
        if args.action == "agreement":
            report = agreement_report(st, tenant=args.tenant, queue=args.queue, seed=args.seed)
            print(json.dumps(report, default=str, indent=2) if args.json else render_text(report))
            return 0
        if args.action == "status":
            rows = [progress(st, tenant=args.tenant, queue=q) for q in queue_names(st, tenant=args.tenant)]
            if args.json:
                print(json.dumps([{"queue": p.queue, "items": p.items, "reviewers_per_item": p.reviewers_per_item,
                                   "complete": p.complete, "decisions": p.decisions, "target": p.target,
                                   "reviewers": [{"name": r.name, "decided": r.decided} for r in p.reviewers]}
                                  for p in rows]))
                return 0
            for p in rows:
                who = ", ".join(f"{r.name} {r.decided}" for r in p.reviewers) or "nobody yet"
                print(f"{p.queue}: {p.decisions}/{p.target} decisions ({p.percent:.0f}%), {p.complete} of "
                      f"{p.items} items complete, K={p.reviewers_per_item}; {who}")
            if not rows:
                print(f"no review queues in tenant {args.tenant!r}", file=sys.stderr)
            return 0
        out = export_gold(st, tenant=args.tenant, queue=args.queue, out_dir=args.out, to_store=args.to_store)
        stored = f"; stored {out['stored']} gold rows" if args.to_store else ""
        print(f"wrote {out['items']} reviewed items to {args.out / 'reviews.jsonl'} and {out['qrels']} "
              f"judgements to {args.out / 'qrels.txt'}{stored}")
        return 0

    return _run(args, store, body, "review")
