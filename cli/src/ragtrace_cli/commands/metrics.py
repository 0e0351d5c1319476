"""`ragtrace metrics --qrels QRELS --run RUN [--json]`: trec_eval-compatible measures on TREC files."""

from __future__ import annotations

import argparse
import json
import sys

from ragtrace_evaluator.metrics.trec import TrecFormatError, evaluate, read_qrels, read_run


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ragtrace metrics",
        description="Retrieval measures with trec_eval's names and conventions (re-sort by score desc, "
        "then doc id desc; graded gains for ndcg_cut).",
    )
    p.add_argument("--qrels", required=True, help="TREC qrels file: 'query_id iter doc_id relevance'")
    p.add_argument("--run", required=True, help="TREC run file: 'query_id Q0 doc_id rank score tag'")
    p.add_argument("--json", action="store_true", help="print JSON with 'per_query' and 'all' keys")
    p.add_argument("-m", "--measures", default=None,
                   help="comma-separated trec_eval names, e.g. P_5,recall_10,ndcg_cut_10,success_1,recip_rank,map")
    p.add_argument("-q", "--per-query", action="store_true", help="table: also print every query (like trec_eval -q)")
    p.add_argument("-l", "--relevance-level", type=int, default=1,
                   help="judgements >= this count as relevant for binary measures (trec_eval -l; default 1)")
    p.add_argument("-c", "--complete", action="store_true",
                   help="average over every qrels query, missing runs scoring 0 (trec_eval -c)")
    return p


def metrics_main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    measures = [m.strip() for m in args.measures.split(",") if m.strip()] if args.measures is not None else None
    if measures == []:  # e.g. -m "" or -m , from an unset shell variable: not "every measure", not none
        print(f"ragtrace metrics: -m {args.measures!r} names no measure; give e.g. -m P_5,ndcg_cut_10,map, "
              "or leave -m out for the default set", file=sys.stderr)
        return 2
    try:
        result = evaluate(read_qrels(args.qrels), read_run(args.run), measures,
                          relevance_level=args.relevance_level, complete=args.complete)
    except FileNotFoundError as exc:
        print(f"ragtrace metrics: {exc.filename}: no such file", file=sys.stderr)
        return 2
    except OSError as exc:  # a directory, no permission: say which file, not a traceback
        print(f"ragtrace metrics: cannot read {exc.filename}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except TrecFormatError as exc:
        print(f"ragtrace metrics: {exc}", file=sys.stderr)
        return 2
    report = result.as_json()
    if not result.per_query:
        print("ragtrace metrics: no query of the run appears in the qrels; nothing to evaluate "
              "(check that both files use the same query ids)", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    # trec_eval's layout: measure, query (or 'all'), value with 4 decimals.
    rows: list[tuple[str, str, object]] = []
    if args.per_query:
        for qid, vals in report["per_query"].items():
            rows += [(m, qid, v) for m, v in vals.items()]
    rows += [(m, "all", v) for m, v in report["all"].items()]
    for name, qid, value in rows:
        shown = str(value) if isinstance(value, int) else f"{value:.4f}"
        print(f"{name:<22}\t{qid}\t{shown}")
    for name, n_undef in report["undefined"].items():
        print(f"note: {name} undefined for {n_undef} quer{'y' if n_undef == 1 else 'ies'} "
              "without relevant judgements (counted as 0, as trec_eval does)", file=sys.stderr)
    return 0
