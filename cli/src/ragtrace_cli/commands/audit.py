"""`ragtrace audit` and `ragtrace labels import`.

``ragtrace audit --store STORE ...`` runs the audit in this process; ``--server URL`` asks a running
`ragtrace serve` (which owns an embedded store) to run it through ``POST /api/audit`` and prints
the report it returns. Both print the same tables and write the same files.

Neither command changes the schema (`ragtrace store migrate` does); exit codes as in every command
(`ragtrace_cli.commands.common`): 2 for a usage error or a store that cannot be used.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from ragtrace_cli.commands.common import (
    ENV_TENANT_TOKEN,
    EXIT_STORE,
    TIME_HELP,
    decide_tenant,
    joined_ages,
    open_reader,
    server_arg,
    tenant_arg,
)
from ragtrace_store import LabelError, LabelRecord, json_line_values, write_label_lines


def _audit_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ragtrace audit",
        description="Label sampled traces with their failing boundary (retrieval_gap, rank_inversion, "
        "under_use, fabrication, ok) and write the labels back to the store.",
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument("--store", help="embedded store directory or http(s)://user:pw@host:8123/db "
                       "(default: $RAGTRACE_STORE or ~/.local/share/ragtrace/store)")
    where.add_argument("--server", type=server_arg, metavar="URL",
                       help="ask a running `ragtrace serve` at URL to run the audit")
    p.add_argument("--token", default=None, help=f"bearer token for --server (default: ${ENV_TENANT_TOKEN})")
    p.add_argument("--tenant", default=None, type=tenant_arg,
                   help="tenant to audit (direct --store only; the server derives it from the token)")
    p.add_argument("--service")
    p.add_argument("--release")
    p.add_argument("--since", help=TIME_HELP)
    p.add_argument("--until", help=TIME_HELP)
    size = p.add_mutually_exclusive_group()
    size.add_argument("--sample", type=int, metavar="N",
                      help="N traces (per stratum with --stratify), by trace-id hash")
    size.add_argument("--rate", type=float, metavar="F", help="share of traces in (0, 1], by trace-id hash")
    p.add_argument("--stratify", metavar="COLS", help="stratify --sample by release, route or release,route")
    p.add_argument("--shard", metavar="i/n", help="label only shard i of n (shards count from 0)")
    p.add_argument("--sampler", type=int, metavar="V", help="sampler version (default 2, xxHash64 in the engine); "
                   "1 chooses what audits whose manifest names no sampler chose (sha256)")
    p.add_argument("--stages", choices=("retrieval", "all"), default="all")
    p.add_argument("--labeller", default="offline",
                   help="grounding labeller: offline (default), nli:MODEL, ... or py:MODULE:FUNCTION")
    p.add_argument("--relevance-labeller", default="offline",
                   help="relevance labeller for traces without gold ('none' = leave relevance unknown)")
    p.add_argument("--json", dest="json_path", metavar="REPORT", help="write the JSON summary here ('-' = stdout)")
    p.add_argument("--per-trace", metavar="FILE.jsonl", help="write one JSON label record per trace")
    p.add_argument("--no-resume", action="store_true", help="relabel traces already labelled under this manifest")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait for --server (default 3600)")
    p.add_argument("--quiet", action="store_true", help="no tables, no progress bar")
    # Human review (ragtrace_review): put the flagged traces into a review queue.
    p.add_argument("--queue", metavar="NAME", help="also fill review queue NAME (local --store only)")
    p.add_argument("--per-mode", type=int, default=20, help="review queue cap per stratum (default: 20)")
    p.add_argument("--reviewers", type=int, default=2, help="K distinct reviewers per queued item (default: 2)")
    return p


def audit_main(argv: list[str]) -> int:
    parser = _audit_parser()
    args = parser.parse_args(joined_ages(argv))
    decide_tenant(parser, args)
    if not args.timeout > 0:  # httpx would raise "Timeout value out of range" from the socket
        parser.error(f"--timeout must be > 0 seconds, got {args.timeout}")
    options: dict[str, Any] = {
        "service": args.service, "release": args.release, "since": args.since, "until": args.until,
        "sample": args.sample, "rate": args.rate, "stratify": args.stratify, "shard": args.shard,
        "sampler": args.sampler,
        "stages": args.stages, "labeller": args.labeller,
        "relevance_labeller": args.relevance_labeller,
        "resume": not args.no_resume, "batch_size": args.batch_size,
    }
    options = {k: v for k, v in options.items() if v is not None}
    # output paths are checked before the (long) audit, not found unwritable after it
    for flag, target in (("--json", args.json_path), ("--per-trace", args.per_trace)):
        problem = _unwritable(target, create_parents=flag == "--per-trace")
        if problem:
            print(f"ragtrace audit: {flag} {target}: {problem}", file=sys.stderr)
            return 2
    if args.server and args.queue:
        print("ragtrace audit: --queue needs direct store access (--store); with --server, queue the "
              "audit's labels afterwards: ragtrace review enqueue --queue NAME --manifest MANIFEST_ID "
              "--server URL --token REVIEWER_TOKEN", file=sys.stderr)
        return 2
    if args.queue is not None:  # refused before the (long) audit, not after it
        from ragtrace_review import ReviewError, check_enqueue_options

        try:
            check_enqueue_options(args.queue, args.per_mode, args.reviewers)
        except ReviewError as exc:
            print(f"ragtrace audit: --queue: {exc}", file=sys.stderr)
            return 2
    if args.server:
        code, report = _remote_audit(args.server, options, token=args.token or os.environ.get(ENV_TENANT_TOKEN),
                                     want_records=bool(args.per_trace), timeout=args.timeout)
        if code:
            return code
        records = report.pop("records", None)
        if args.per_trace:
            if records is None:
                print("ragtrace audit: the server did not return per-trace records; upgrade the server",
                      file=sys.stderr)
                return 1
            try:
                write_label_lines(args.per_trace, [LabelRecord.from_json(rec, f"server record {i}")
                                                   for i, rec in enumerate(records, start=1)])
            except LabelError as exc:
                print(f"ragtrace audit: the server sent a label record this client cannot read ({exc}); "
                      "use the same ragtrace version on both sides", file=sys.stderr)
                return 1
    else:
        code, report = _local_audit(args, options)
        if code:
            return code
    if (report.get("sampling") or {}).get("n_candidates") == 0:
        # a mistyped --release or --service gives an empty report: say it, so it is not read as "all ok"
        given = ", ".join(f"--{k} {v!r}" for k, v in (("tenant", args.tenant), ("service", args.service),
                          ("release", args.release), ("since", args.since), ("until", args.until))
                          if v is not None and not (k == "tenant" and args.server))
        where = f"matches {given}" if given else "is in the token's tenant"  # --server without a filter
        print(f"ragtrace audit: no stored trace {where}; nothing was labelled. `ragtrace traces` "
              "with the same filters lists what the store holds", file=sys.stderr)
    if args.json_path:
        text = json.dumps(report, indent=2, default=str)
        if args.json_path == "-":
            print(text)
        else:
            try:
                Path(args.json_path).write_text(text + "\n", encoding="utf-8")
            except OSError as exc:
                print(f"ragtrace audit: cannot write --json {args.json_path}: {exc.strerror or exc} (the labels "
                      "are in the store: rerun with another --json to get the report without relabelling)",
                      file=sys.stderr)
                return 1
    if not args.quiet and args.json_path != "-":
        from ragtrace_evaluator.audit.tables import print_report

        print_report(report)
    return 0


def _unwritable(target: str | None, *, create_parents: bool) -> str | None:
    """Why an output file cannot be written there (None when it can be tried, or for none/stdout)."""
    if not target or target == "-":
        return None
    path = Path(target)
    if path.is_dir():
        return "is a directory; give a file name"
    if not create_parents and not path.parent.is_dir():
        return f"the directory {path.parent} does not exist; create it or give another path"
    return None


def _local_audit(args: argparse.Namespace, options: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    from ragtrace_evaluator.audit.run import AuditError, run_audit

    # the audit reads traces and writes labels; the schema is `ragtrace store migrate`'s to change
    store = open_reader(args.store, command="audit")
    if store is None:
        return EXIT_STORE, {}
    try:
        report = run_audit(store, tenant=args.tenant, per_trace=args.per_trace,
                           progress=not args.quiet and sys.stderr.isatty(),
                           return_records=bool(args.queue), **options)
        if args.queue:
            from ragtrace_review import ReviewError, enqueue

            # selective labelling: every trace labelled below the labeller's review threshold goes to
            # the queue (not only per-mode samples); a labeller without one keeps the queue's default
            review = (report.get("selective") or {}).get("review_threshold")
            routing: dict[str, Any] = ({"low_confidence": review, "all_low_confidence": True}
                                       if review is not None else {})
            try:
                queued = enqueue(store, args.queue, report.pop("records", []), args.per_mode, args.reviewers,
                                 tenant=args.tenant, **routing)
            except ReviewError as exc:
                print(f"ragtrace audit: review queue: {exc}", file=sys.stderr)
                return 2, {}
            report["review_queue"] = {"queue": queued.queue, "added": queued.added,
                                      "low_confidence_below": review,
                                      "already_queued": queued.already_queued,
                                      "reviewers_per_item": queued.reviewers_per_item}
            print(f"review queue {queued.queue}: added {queued.total_added} traces "
                  f"({queued.already_queued} already queued), K={queued.reviewers_per_item}", file=sys.stderr)
    except AuditError as exc:
        print(f"ragtrace audit: {exc}", file=sys.stderr)
        return 2, {}
    except OSError as exc:
        if not (args.per_trace and exc.filename and Path(exc.filename) == Path(args.per_trace)):
            raise  # not the output file (a labeller's own I/O): its traceback is the information
        # --per-trace could not be written (a permission, a full disk)
        print(f"ragtrace audit: cannot write --per-trace {args.per_trace}: {exc.strerror or exc} (the labels are "
              "in the store: rerun with another --per-trace to get them without relabelling)", file=sys.stderr)
        return 1, {}
    finally:
        store.close()
    return 0, report


def _remote_audit(server: str, options: dict[str, Any], *, token: str | None, want_records: bool,
                  timeout: float) -> tuple[int, dict[str, Any]]:
    from ragtrace_cli.remote import RemoteClient, RemoteError

    body = {**options, "return_records": want_records}
    try:
        with RemoteClient(server, token=token, timeout=timeout,
                          token_hint="give --token or set $RAGTRACE_TOKEN") as remote:
            data: dict[str, Any] = remote.post_json(
                "/api/audit", body, hints={404: "the server has no audit endpoint",
                                           501: "install the evaluator extra on the server"})
    except RemoteError as exc:
        print(f"ragtrace audit: {exc}", file=sys.stderr)
        return (2 if exc.status in (400, 422) else 1), {}
    return 0, data


# --- ragtrace labels import ---------------------------------------------------------------------------
KINDS = ("auto", "qrels", "references", "spans")


class ReferenceFormatError(ValueError):
    """A reference answers file that cannot be read; the message names the line and the fix."""


def _labels_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ragtrace labels", description="Gold labels for the audit.")
    sub = p.add_subparsers(dest="action", required=True)
    imp = sub.add_parser(
        "import", help="import TREC qrels, evidence spans or reference answers keyed by ragtrace.query.id",
        description="Import TREC qrels ('query_id iteration doc_id relevance': the relevant documents, source "
        "'qrels') or reference answers (JSON Lines {\"query_id\": ..., \"reference\": \"...\"}: the correct "
        "answer, which makes the audit score answers by correctness) or evidence spans (JSON Lines "
        "{\"query_id\": ..., \"source_id\": ..., \"start\": N, \"end\": M}: the evidence as character offsets "
        "in a source document, resolved per trace to the chunks that overlap it, so it survives a re-chunking). "
        "query_id is the ragtrace.query.id attribute of the root span. Re-importing replaces earlier "
        "judgements, spans and references.")
    imp.add_argument("file", metavar="FILE", help="TREC qrels file, evidence spans or reference answers (.jsonl)")
    imp.add_argument("--kind", choices=KINDS, default="auto",
                     help="what FILE holds (default auto: JSON Lines with source_id are spans, other JSON Lines "
                          "references, anything else qrels)")
    imp.add_argument("--store", help="embedded store directory or server URL (default: $RAGTRACE_STORE)")
    imp.add_argument("--tenant", default="default", type=tenant_arg)
    return p


def detect_kind(path: str | Path) -> str:
    """'spans' when the first non-blank line is a JSON object with a source_id, 'references' for
    another JSON object, else 'qrels'."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if line.strip():
                if not line.lstrip().startswith("{"):
                    return "qrels"
                try:
                    first = json.loads(line)
                except ValueError:
                    return "references"  # the reader then names the line and what is wrong with it
                return "spans" if isinstance(first, dict) and "source_id" in first else "references"
    return "qrels"


def _is_utf8(path: str | Path) -> bool:
    try:
        with open(path, encoding="utf-8") as fh:
            while fh.read(1 << 20):
                pass
    except UnicodeDecodeError:
        return False
    return True


_REF_SHAPE = 'each line must be a JSON object {"query_id": "q1", "reference": "the correct answer"}'


def read_references(path: str | Path) -> dict[str, str]:
    """Reference answers from JSON Lines, by query id (kept exactly as written, like the collector keeps
    ragtrace.query.id; a later line for the same id wins).

    Raises `ReferenceFormatError` naming the line and what to fix; `FileNotFoundError` as usual.
    """
    refs: dict[str, str] = {}
    for where, obj in json_line_values(path, ReferenceFormatError, _REF_SHAPE):
        if not isinstance(obj, dict):
            raise ReferenceFormatError(f"{where}: not an object (a JSON {type(obj).__name__}); {_REF_SHAPE}")
        if "failure_mode" in obj and "trace_id" in obj and "reference" not in obj:
            raise ReferenceFormatError(
                f"{where}: this is a per-trace label record (`ragtrace audit --per-trace`), not gold: give it "
                "to `ragtrace compare` or `ragtrace review enqueue --labels`; labels import takes TREC qrels, "
                "evidence spans or reference answers")
        qid, ref = obj.get("query_id"), obj.get("reference")
        if isinstance(qid, int) and not isinstance(qid, bool):
            qid = str(qid)
        if not isinstance(qid, str) or not qid:
            raise ReferenceFormatError(f"{where}: 'query_id' must be a non-empty string (the root span's "
                                       f"ragtrace.query.id), got {qid!r}; {_REF_SHAPE}")
        if not isinstance(ref, str) or not ref.strip():
            raise ReferenceFormatError(f"{where}: 'reference' must be a non-empty string (the correct answer), "
                                       f"got {ref!r}; {_REF_SHAPE}")
        # kept verbatim, spaces included: the collector stores ragtrace.query.id as sent, and an
        # id that matched after trimming here would match nothing there
        refs[qid] = ref.strip()
    return refs


def labels_main(argv: list[str]) -> int:
    args = _labels_parser().parse_args(argv)
    from ragtrace_evaluator.metrics.trec import TrecFormatError, read_qrels
    from ragtrace_store import GoldSpanError, read_span_lines

    try:
        kind = detect_kind(args.file) if args.kind == "auto" else args.kind
        spans = read_span_lines(args.file) if kind == "spans" else []
        qrels, refs = (({}, read_references(args.file)) if kind == "references" else
                       ({}, {}) if kind == "spans" else (read_qrels(args.file), {}))
    except FileNotFoundError:
        print(f"ragtrace labels import: {args.file}: no such file", file=sys.stderr)
        return 2
    except OSError as exc:  # a directory, no permission
        print(f"ragtrace labels import: cannot read {args.file}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except (TrecFormatError, ReferenceFormatError, GoldSpanError) as exc:
        if args.kind == "auto":
            hint = f" (read as {kind}; give --kind qrels, --kind spans or --kind references if that is wrong)"
        else:
            looks = detect_kind(args.file) if _is_utf8(args.file) else kind  # a binary file looks like nothing
            hint = "" if looks == kind else f" (the file looks like {looks}: use --kind {looks})"
        print(f"ragtrace labels import: {exc}{hint}", file=sys.stderr)
        return 2
    if not (spans or qrels or refs):
        # "imported 0" with exit 0 would let a wrong or truncated file pass a pipeline unnoticed
        print(f"ragtrace labels import: {args.file} holds nothing to import (it is empty or has only blank "
              "lines): give TREC qrels, evidence spans or reference answers", file=sys.stderr)
        return 2
    store = open_reader(args.store, command="labels import")
    if store is None:
        return EXIT_STORE
    with store:
        if kind == "spans":
            summary = import_spans(store, spans, tenant=args.tenant)
            print(f"imported {summary['spans']} evidence spans ({summary['relevant']} relevant) in "
                  f"{summary['sources']} source documents for {summary['queries']} queries into {store.location}; "
                  f"{summary['matched_queries']} of those query ids match stored traces")
        elif kind == "references":
            summary = import_references(store, refs, tenant=args.tenant)
            print(f"imported {summary['queries']} reference answers into {store.location}; "
                  f"{summary['matched_queries']} of those query ids match stored traces")
        else:
            summary = import_qrels(store, qrels, tenant=args.tenant)
            print(f"imported {summary['judgements']} judgements ({summary['relevant']} relevant) for "
                  f"{summary['queries']} queries into {store.location}; {summary['matched_queries']} of those "
                  "query ids match stored traces")
    if summary["queries"] and not summary["matched_queries"]:
        print(f"note: no stored trace carries these query ids yet (ragtrace.query.id on the root span); "
              f"the {'references apply' if kind == 'references' else 'gold applies'} as soon as such traces "
              "arrive", file=sys.stderr)
    return 0


def import_references(store: Any, refs: dict[str, str], *, tenant: str = "default") -> dict[str, int]:
    """Write reference answers into ``reference_answers`` (source 'import', keyed by query id; a
    re-import replaces the earlier reference)."""
    from ragtrace_store.query_ids import traced_query_ids
    from ragtrace_store.reference_answers import add_reference_answers

    written = add_reference_answers(store, refs, tenant=tenant)
    return {"queries": written, "matched_queries": traced_query_ids(store, tenant=tenant, query_ids=list(refs))}


def import_spans(store: Any, spans: list[Any], *, tenant: str = "default") -> dict[str, int]:
    """Write evidence spans into ``gold_spans`` (source 'import', keyed by query id; a re-import of a
    span replaces it). The audit resolves them per trace (`ragtrace_evaluator.audit.evidence`)."""
    from ragtrace_store import write_gold_spans
    from ragtrace_store.query_ids import traced_query_ids

    write_gold_spans(store, spans, tenant=tenant)
    queries = sorted({s.query_id for s in spans})
    return {"spans": len(spans), "relevant": sum(1 for s in spans if s.relevance > 0),
            "sources": len({s.source_id for s in spans}), "queries": len(queries),
            "matched_queries": traced_query_ids(store, tenant=tenant, query_ids=queries)}


def import_qrels(store: Any, qrels: dict[str, dict[str, int]], *, tenant: str = "default") -> dict[str, int]:
    """Write qrels into the ``gold`` table (source 'qrels', keyed by query id; idempotent)."""
    from ragtrace_store.gold_judgements import GoldJudgement, add_gold_judgements
    from ragtrace_store.query_ids import traced_query_ids

    judgements = [GoldJudgement(qid, "", doc, rel) for qid, docs in qrels.items() for doc, rel in docs.items()]
    add_gold_judgements(store, judgements, tenant=tenant, source="qrels")
    return {"judgements": len(judgements), "relevant": sum(1 for j in judgements if j.relevance > 0),
            "queries": len(qrels), "matched_queries": traced_query_ids(store, tenant=tenant, query_ids=list(qrels))}
