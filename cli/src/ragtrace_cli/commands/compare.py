"""`ragtrace compare`: two releases, paired over query ids, with honest statistics and gates.

Exit codes: 0 no gate tripped, 1 a gate tripped (the movers of the tripped boundary are printed),
2 usage error (bad arguments, unreadable input, mixed labeller manifests without --force).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from pathlib import Path
from typing import Any

from ragtrace_cli.commands.common import printable, tenant_arg
from ragtrace_evaluator.compare.comparison import Comparison, compare
from ragtrace_evaluator.compare.gates import load_gates
from ragtrace_evaluator.compare.metric_info import DECOMP_PREFIX
from ragtrace_evaluator.compare.movers import Mover
from ragtrace_evaluator.compare.records import (
    CompareError,
    LabelSet,
    MixedManifestError,
    check_manifests,
    load_jsonl,
    load_pair,
    load_release,
    releases_manifests,
)
from ragtrace_evaluator.compare.significance import significance

__all__ = ["build_parser", "compare_main", "load_side", "load_sides"]

_FILE_SUFFIXES = (".jsonl", ".json", ".ndjson")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ragtrace compare",
        description="Compare two releases paired over query ids: every stage metric and contingency cell "
                    "with paired bootstrap CIs, the e2e decomposition, the movers per boundary, and gates.",
        # no prefixes: `--server URL`, the server mode of traces/audit/review, would be read as --server-url
        allow_abbrev=False,
    )
    p.add_argument("--baseline", required=True, metavar="A",
                   help="a release in the store (its service.version) or a per-trace JSON Lines file")
    p.add_argument("--candidate", required=True, metavar="B", help="the release or file to compare with A")
    p.add_argument("--store", help="store directory or ClickHouse URL (default: $RAGTRACE_STORE or the "
                                   "per-user store); only used for releases, not files")
    p.add_argument("--tenant", default="default", type=tenant_arg, help="tenant of the releases in the store")
    p.add_argument("--service", help="only labels of this service.name")
    p.add_argument("--manifest", help="labeller manifest id to use when a release has labels of several")
    p.add_argument("--force", action="store_true",
                   help="compare labels of different labeller manifests anyway (the report says so)")
    p.add_argument("--gates", metavar="GATES.toml", help="gate file (default: one 2.5-SE gate per stage)")
    p.add_argument("--threshold", type=float, default=0.5,
                   help="acceptability threshold on the 0-1 end-to-end score (default 0.5)")
    p.add_argument("--json", metavar="OUT", help="write the JSON report here ('-' = stdout, no tables)")
    p.add_argument("--html", metavar="OUT.html", help="write the self-contained HTML report here")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples (default 10000)")
    p.add_argument("--confidence", type=float, default=0.95, help="confidence level (default 0.95)")
    p.add_argument("--min-change", type=float, default=0.05,
                   help="a change of a 0-1 score up to this counts as flat: in the surface × grounding quadrants "
                        "and in the deciding slice of a recall drop (default 0.05)")
    p.add_argument("--max-ids", type=int, default=20, help="query ids listed per mover group in the terminal")
    p.add_argument("--server-url", metavar="URL",
                   help="base URL of `ragtrace serve`: the HTML links each trace id to URL/traces/ID (default: "
                        "each trace shows its `ragtrace traces show ID` command)")
    p.add_argument("--save", action="store_true",
                   help="also keep the JSON report in the store (--store, tenant --tenant), so the /dashboard of "
                        "`ragtrace serve` shows this comparison's gates")
    p.add_argument("--trace-url", metavar="TEMPLATE",
                   help="link template for trace ids in the HTML, e.g. http://host:4318/traces/{trace_id} "
                        "(overrides --server-url)")
    return p


def _is_file_arg(value: str) -> bool:
    """A path (a directory too: `load_side` refuses it by name), not a release of the store."""
    return Path(value).exists() or value.endswith(_FILE_SUFFIXES)


def _check_path_side(value: str) -> None:
    """Refuse a side that names a path but no readable file (no store is opened for that)."""
    if Path(value).is_dir():  # not a release name either: say so rather than look it up in the store
        raise CompareError(f"{value} is a directory; give a per-trace JSON Lines file (`ragtrace audit "
                           "--per-trace FILE.jsonl`) or a release name")
    if _is_file_arg(value) and not Path(value).is_file():
        raise CompareError(f"{value}: no such file (a path or a *.jsonl name is read as a per-trace file; "
                           "give a release name to read the store)")


def load_side(value: str, args: argparse.Namespace, store_box: list[Any]) -> LabelSet:
    """A JSON Lines file, or the labels of a release in the store (opened once, kept in store_box)."""
    _check_path_side(value)
    if _is_file_arg(value):
        return load_jsonl(value)
    store = _store(args, store_box)
    manifest = _manifests(store, [value], args)[0]
    try:
        (labels,) = load_release(store, value, tenant=args.tenant, service=args.service, manifest_id=manifest)
    except CompareError:
        raise
    except Exception as exc:  # the driver's errors (e.g. no labels table) become usage errors
        raise CompareError(f"cannot read the labels of release {value!r} from {store.location}: {exc}. "
                           "Run `ragtrace audit` on the store first.") from exc
    return labels


def load_sides(args: argparse.Namespace, store_box: list[Any]) -> tuple[LabelSet, LabelSet]:
    """Both sides; two releases of the store are paired by the engine (`load_pair`: only the labels
    of query ids both have are read)."""
    if _is_file_arg(args.baseline) or _is_file_arg(args.candidate):
        # both paths first: a mistyped candidate file is named before the baseline's store is opened
        _check_path_side(args.baseline)
        _check_path_side(args.candidate)
        return load_side(args.baseline, args, store_box), load_side(args.candidate, args, store_box)
    store = _store(args, store_box)
    chosen = _manifests(store, [args.baseline, args.candidate], args)
    try:
        return load_pair(store, (args.baseline, chosen[0]), (args.candidate, chosen[1]), tenant=args.tenant,
                         service=args.service)
    except CompareError:
        raise
    except Exception as exc:  # the driver's errors become usage errors
        raise CompareError(f"cannot read the labels of releases {args.baseline!r} and {args.candidate!r} from "
                           f"{store.location}: {exc}. Run `ragtrace audit` on the store first.") from exc


def _store(args: argparse.Namespace, store_box: list[Any]) -> Any:
    if not store_box:
        from ragtrace_cli.commands.common import open_reader

        # never migrates, and refuses a missing store or an old schema with what to run
        problems: list[str] = []
        opened = open_reader(args.store, command="compare", say=problems.append, locked=_locked(args.store))
        if opened is None:
            raise CompareError("; ".join(problems))
        store_box.append(opened)
    return store_box[0]


def _locked(store: str | None) -> str:
    """What works while `ragtrace serve` owns the embedded store (compare cannot go through it)."""
    from ragtrace_store import default_store_path

    location = store if store is not None else default_store_path()
    return (f"the embedded store {location} is in use by another process (usually `ragtrace serve`), and compare "
            "reads a store directly: it has no --server mode. While the server runs, write each release's labels "
            "through it and compare the files: `ragtrace audit --server URL --release R --per-trace R.jsonl` "
            "(traces already labelled by the same labellers are read back, not labelled again), then "
            "`ragtrace compare --baseline A.jsonl --candidate B.jsonl`. Or stop the server and rerun this command.")


def _manifests(store: Any, values: list[str], args: argparse.Namespace) -> list[str]:
    """The labeller manifest to compare of each release in ``values`` (one read): the only one, or
    --manifest, or the newest with --force."""
    try:
        found = releases_manifests(store, values, tenant=args.tenant, service=args.service, manifest_id=args.manifest)
    except Exception as exc:  # the driver's errors (e.g. no labels table) become usage errors
        raise CompareError(f"cannot read the labels of release {values[0]!r} from {store.location}: {exc}. "
                           "Run `ragtrace audit` on the store first.") from exc
    chosen = []
    for value in values:
        ids = found[value]
        if not ids:
            scope = f" of service {args.service!r}" if args.service else ""
            raise CompareError(f"no audit labels for release {value!r}{scope} in tenant {args.tenant!r}"
                               f"{' under manifest ' + args.manifest if args.manifest else ''} in "
                               f"{store.location}: run `ragtrace audit --release {value}` first, or give a "
                               "per-trace JSON Lines file")
        if len(ids) > 1 and not args.force:
            raise MixedManifestError(
                f"release {value!r} has labels from {len(ids)} labeller manifests {ids}: choose one with "
                "--manifest ID (or --force to take the newest)")
        chosen.append(ids[0])
    return chosen


def _fmt(x: float | None, digits: int = 4) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "undefined"
    return f"{x:.{digits}f}"


def _delta(x: float | None) -> str:
    if x is None or not math.isfinite(x):
        return "undefined"
    return f"{x:+.4f}"


def _ci(ci: list[float | None]) -> str:
    lo, hi = ci
    if lo is None or hi is None:
        return "undefined"
    return f"[{lo:+.4f}, {hi:+.4f}]"


#: a row's style by `significance` (the HTML report's classes and plots follow the same rule)
_STYLES = {"worse": "bold red", "better": "green", "changed": "magenta", "flat": "", "undefined": ""}


def _style(delta: float | None, ci: list[float | None], direction: str | None) -> str:
    """Red when the CI excludes 0 on the worse side, green on the better one, magenta when the
    statistic has no better direction (an abstention rate) and its CI excludes 0."""
    return _STYLES[significance(delta, ci, direction)]


def render_terminal(c: Comparison, report: dict[str, Any], *, max_ids: int = 20, console: Any = None) -> None:
    """Print the comparison as rich tables."""
    from rich.console import Console
    from rich.table import Table

    # emoji=False: rich would print the `:fire:` of a query id, or the `:ok:` of `mode:ok`, as an emoji
    con = console or Console(width=None if sys.stdout.isatty() else 150, highlight=False, emoji=False)
    pairing = report["pairing"]
    s = report["settings"]
    con.print(f"[bold]ragtrace compare[/bold]  baseline [cyan]{_esc(c.baseline.name)}[/cyan] → candidate "
              f"[cyan]{_esc(c.candidate.name)}[/cyan]: {pairing['n_pairs']} paired queries; "
              f"{pairing['only_baseline']['n']} only in baseline, {pairing['only_candidate']['n']} only in "
              f"candidate; {s['resamples']} paired bootstrap resamples, seed {s['seed']}, "
              f"{s['confidence_level']:.0%} intervals")
    for side, key in (("baseline", "only_baseline"), ("candidate", "only_candidate")):
        ids = pairing[key]["query_ids"]
        if ids:
            more = f" … {len(ids) - max_ids} more" if len(ids) > max_ids else ""
            con.print(f"  unmatched (only in {side}): {_esc(', '.join(ids[:max_ids]))}{more}")

    _failure_modes(con, report, max_ids)
    _surface_grounding(con, report, max_ids)

    t = Table(title="Stage metrics (candidate − baseline, paired)", title_justify="left")
    for col in ("metric", "boundary", "n", "baseline", "candidate", "Δ", "CI (BCa)", "CI (percentile)"):
        t.add_column(col, justify="left" if col in ("metric", "boundary") else "right")
    for m in report["metrics"]:
        style = _style(m["delta"], m["ci"]["bca"], m["direction"])
        t.add_row(_esc(m["metric"]), m["boundary"] or "", str(m["n"]), _fmt(m["baseline"]), _fmt(m["candidate"]),
                  _delta(m["delta"]), _ci(m["ci"]["bca"]), _ci(m["ci"]["percentile"]), style=style)
    con.print(t)

    d = report["decomposition"]
    t = Table(title=f"Decomposition: e2e = recall·P(pass | gold in C) + (1 − recall)·P(pass | no gold in C)  "
                    f"(n = {d['n']})", title_justify="left")
    for col in ("term", "baseline", "candidate", "Δ", "CI (BCa)"):
        t.add_column(col, justify="left" if col == "term" else "right")
    labels = {"recall": "recall (gold in context)", "p_pass_given_gold": "P(pass | gold in C)",
              "p_pass_without_gold": "P(pass | no gold in C)", "term_gold": "recall·P(pass | gold)",
              "term_without_gold": "(1 − recall)·P(pass | no gold)", "e2e": "e2e pass"}
    for key, label in labels.items():
        t.add_row(label, _fmt(d["baseline"][key]), _fmt(d["candidate"][key]), _delta(d["delta"][key]),
                  _ci(d["ci"][key]["bca"]), style="bold" if key == "e2e" else "")
    con.print(t)
    dg, dn, de = (d["delta"].get(k) for k in ("term_gold", "term_without_gold", "e2e"))
    if dg is not None and dn is not None and de is not None:
        con.print(f"  e2e moved {de:+.4f} = {dg:+.4f} (queries with gold in context) {dn:+.4f} (queries "
                  "without): a small net change can hide opposite moves at two boundaries.")

    t = Table(title="Contingency cells (share of paired queries)", title_justify="left")
    for col in ("cell", "baseline n", "candidate n", "baseline", "candidate", "Δ", "CI (BCa)"):
        t.add_column(col, justify="left" if col == "cell" else "right")
    for cell in report["contingency"]:
        t.add_row(cell["cell"], str(cell["baseline_count"]), str(cell["candidate_count"]),
                  _fmt(cell["baseline"]), _fmt(cell["candidate"]), _delta(cell["delta"]), _ci(cell["ci"]["bca"]))
    con.print(t)

    thr = report["below_threshold"]
    t = Table(title=f"Movers (mean {c.movers[0].value if c.movers else 'score'} per group; share below "
                    f"{thr['threshold']:g})", title_justify="left")
    for col in ("boundary", "direction", "n", "baseline mean", "candidate mean", "below (b → c)", "query ids"):
        t.add_column(col, justify="right" if col in ("n", "baseline mean", "candidate mean") else "left")
    for mv in c.movers:
        ids = "" if mv.direction == "held" else _ids(mv.query_ids, 5)
        style = "bold red" if mv.direction == "lost" and mv.n else ""
        t.add_row(mv.boundary, mv.direction, str(mv.n), _fmt(mv.baseline_mean, 3), _fmt(mv.candidate_mean, 3),
                  f"{_fmt(mv.baseline_below, 3)} → {_fmt(mv.candidate_below, 3)}", _esc(ids), style=style)
    con.print(t)
    if thr.get("baseline") is not None:
        con.print(f"  share of queries with score below {thr['threshold']:g}: baseline {_fmt(thr['baseline'])}, "
                  f"candidate {_fmt(thr['candidate'])} (Δ {_delta(thr['delta'])}, CI "
                  f"{_ci(thr['ci']['bca'])})")

    t = Table(title="Gates", title_justify="left")
    for col in ("metric", "gate", "threshold", "observed", "P(false alarm)", "status"):
        t.add_column(col, justify="left" if col in ("metric", "gate", "status") else "right")
    for g in c.gates.results:
        gate = f"{g.k:g} SE drop" if g.kind == "se" else f"{g.kind} ({g.direction} is better)"
        t.add_row(g.metric, gate, _delta(g.threshold) if g.kind == "se" else _fmt(g.threshold),
                  _delta(g.observed) if g.kind == "se" else _fmt(g.observed),
                  _fmt(g.false_alarm, 4), g.status.upper() if g.tripped else g.status,
                  style="bold red" if g.tripped else ("yellow" if g.status == "undefined" else ""))
    con.print(t)
    gs = c.gates
    if gs.family_false_alarm is not None:
        con.print(f"  family-wise false-alarm probability of these {len(gs.results)} gates under no change: "
                  f"{gs.family_false_alarm:.2%} (simulated from {gs.n_replicates} joint bootstrap replicates; "
                  f"{gs.independent_false_alarm:.2%} if the gates were independent)")
    _tripped_report(con, c, max_ids)
    _notes(con, c, max_ids)


def _notes(con: Any, c: Comparison, max_ids: int) -> None:
    """The comparison's own notes (pairing, missing scores, forced manifests) in full; the bootstrap's
    notes on single statistics (an interval left undefined, resamples that drew no query of a
    conditioning set) only counted: they are under "warnings" in the JSON and HTML reports."""
    if c.notes:
        con.print(f"[yellow]{len(c.notes)} note{'s' if len(c.notes) > 1 else ''}[/yellow]:")
        for note in c.notes[:max_ids]:
            con.print(f"  - {_esc(note)}")
        if len(c.notes) > max_ids:
            con.print(f"  … {len(c.notes) - max_ids} more in the JSON report")
    n_stat = len(c.all_warnings()) - len(c.notes)
    if n_stat:
        con.print(f"{n_stat} bootstrap note{'s' if n_stat > 1 else ''} on undefined values or intervals (never "
                  "reported as 0) are under warnings in the JSON and HTML reports.")


def _failure_modes(con: Any, report: dict[str, Any], max_ids: int) -> None:
    """The mode table (rates, paired Δ, both CIs, n) and the transition matrix, first: which mode
    moved is the first question of a release review."""
    from rich.table import Table

    rows = report["failure_modes"]
    if not rows:
        return
    t = Table(title="Failure modes (share of paired queries; candidate − baseline, paired)", title_justify="left")
    for col in ("mode", "n", "baseline", "candidate", "Δ", "CI (BCa)", "CI (percentile)"):
        t.add_column(col, justify="left" if col == "mode" else "right")
    for m in rows:
        count = f" ({m['baseline_count']} → {m['candidate_count']})" if m["baseline_count"] is not None else ""
        t.add_row(m["mode"] + count, str(m["n"]), _fmt(m["baseline"]), _fmt(m["candidate"]), _delta(m["delta"]),
                  _ci(m["ci95"]["bca"]), _ci(m["ci95"]["percentile"]),
                  style=_style(m["delta"], m["ci95"]["bca"], m["direction"]))
    con.print(t)
    tr = report["failure_mode_transitions"]
    if not tr:
        return
    modes = tr["modes"]
    t = Table(title=f"Mode transitions (rows: baseline, columns: candidate; {tr['n_changed']} of {tr['n']} queries "
                    "changed mode)", title_justify="left")
    t.add_column("baseline \\ candidate")
    for m in modes:
        t.add_column(m, justify="right")
    for i, m in enumerate(modes):
        t.add_row(m, *(f"[bold]{n}[/bold]" if i == j else str(n) for j, n in enumerate(tr["counts"][i])))
    con.print(t)
    if tr["n_unknown"]:
        con.print(f"  {tr['n_unknown']} paired queries have no mode on one side and are not in the matrix")
    for cell in tr["changed"][:5]:
        ids = _ids(tuple(cell["query_ids"]), min(5, max_ids))
        con.print(f"  {cell['baseline']} → {cell['candidate']}: {cell['n']}  {_esc(ids)}")
    if len(tr["changed"]) > 5:
        con.print(f"  … {len(tr['changed']) - 5} more transitions (all ids are in --json)")


def _surface_grounding(con: Any, report: dict[str, Any], max_ids: int) -> None:
    """Token F1 against the reference beside groundedness, on the same queries, and the quadrants."""
    from rich.table import Table

    sg = report.get("surface_grounding")
    if sg is None:
        return
    if not sg["available"]:
        con.print(f"Surface × grounding: no reference — {_esc(sg['reason'] or '')}")
        return
    t = Table(title=f"Surface × grounding (paired, on the {sg['n']} queries with both scores in both releases; "
                    f"{sg['n_no_surface']} without a surface score)", title_justify="left")
    for col in ("axis", "metric", "n", "baseline", "candidate", "Δ", "CI (BCa)", "CI (percentile)"):
        t.add_column(col, justify="left" if col in ("axis", "metric") else "right")
    for axis in ("surface", "grounding"):
        m = sg[axis]
        t.add_row(axis, m["metric"], str(sg["n"]), _fmt(m["baseline"]),
                  _fmt(m["candidate"]), _delta(m["delta"]), _ci(m["ci"]["bca"]), _ci(m["ci"]["percentile"]),
                  style=_style(m["delta"], m["ci"]["bca"], "higher"))
    con.print(t)
    counts = ", ".join(f"{q['quadrant'].replace('_', ' ')} {q['n']}" for q in sg["quadrants"])
    con.print(f"  quadrants of (Δ{sg['surface_metric']}, Δgroundedness), moves over {sg['min_change']:g}: {counts}; "
              f"flat on an axis {sg['n_flat']}")
    mv = sg["movers"]
    if mv["n"]:
        con.print(f"  [bold red]surface up, grounding down[/bold red]: {mv['n']} quer{'y' if mv['n'] == 1 else 'ies'} "
                  "(the answer matches the reference's words better while fewer of its claims are supported)")
        for qid, tb, ds, dg in list(zip(mv["query_ids"], mv["candidate_trace_ids"], mv["delta_surface"],
                                        mv["delta_grounding"], strict=True))[:max_ids]:
            show = f"ragtrace traces show {tb}" if tb else "(no trace id)"
            con.print(f"    {_esc(qid)}  Δsurface {ds:+.3f}  Δgrounding {dg:+.3f}  → {_esc(show)}", soft_wrap=True)
        if mv["n"] > max_ids:
            con.print(f"    … {mv['n'] - max_ids} more (all ids are in --json)")


def _tripped_report(con: Any, c: Comparison, max_ids: int) -> None:
    """Each tripped gate, then the movers of every boundary they name, each boundary once (gates at
    the same boundary share its movers; a gate at no single boundary, e.g. the pass rate, names all)."""
    if not c.gates.tripped:
        return
    con.print()
    boundaries: list[str] = []
    with_movers = {m.boundary for m in c.movers}
    for g in c.gates.tripped:
        con.print(f"[bold red]GATE TRIPPED[/bold red] {_esc(g.metric)}: {_esc(g.reason)}")
        named = [g.boundary] if g.boundary in with_movers else sorted(with_movers)
        boundaries += [b for b in named if b not in boundaries]
    if boundaries:
        con.print("[bold]Movers at the tripped gates' boundaries[/bold] (each boundary once)")
    for b in boundaries:
        for mv in c.movers:
            if mv.boundary != b:
                continue
            con.print(f"  [bold]{b} {mv.direction}[/bold]: {mv.n} quer{'y' if mv.n == 1 else 'ies'}, mean {mv.value} "
                      f"{_fmt(mv.baseline_mean, 3)} → {_fmt(mv.candidate_mean, 3)}, below threshold "
                      f"{_fmt(mv.baseline_below, 3)} → {_fmt(mv.candidate_below, 3)}")
            if mv.direction != "held":
                _list_ids(con, mv, max_ids)
        ds = c.deciding_slice
        if ds is not None and b == "gold_in_context" and ds.tripped_gates:
            style = "bold red" if ds.verdict in ("fell", "mixed") else "bold yellow"
            con.print(f"  [{style}]verdict[/{style}]: {_esc(ds.statement)}")


def _list_ids(con: Any, mv: Mover, max_ids: int) -> None:
    for qid, ta, tb in list(zip(mv.query_ids, mv.baseline_trace_ids, mv.candidate_trace_ids,
                                strict=True))[:max_ids]:
        show = f"ragtrace traces show {tb}" if tb else "(no trace id)"
        # soft_wrap: a line with two full trace ids is longer than the console; broken, its command
        # would not paste
        con.print(f"    {_esc(qid)}  baseline {_esc(ta or '-')}  candidate {_esc(tb or '-')}  → {_esc(show)}",
                  soft_wrap=True)
    if mv.n > max_ids:
        con.print(f"    … {mv.n - max_ids} more (all ids are in --json)")


def _save(args: argparse.Namespace, store_box: list[Any], report: dict[str, Any],
          manifest_ids: tuple[str, ...]) -> None:
    """`--save`: the report into the store's ``compare_reports`` (the store of the releases, else --store)."""
    from ragtrace_store.compare_reports import save_compare_report

    if not store_box:
        from ragtrace_cli.commands.common import open_reader

        problems: list[str] = []
        opened = open_reader(args.store, command="compare", say=problems.append, locked=_locked(args.store))
        if opened is None:
            raise CompareError(f"--save: {'; '.join(problems)}")
        store_box.append(opened)
    store = store_box[0]
    try:
        report_id = save_compare_report(store, report, tenant=args.tenant, baseline=args.baseline,
                                        candidate=args.candidate, manifest_ids=sorted(set(manifest_ids)))
    except Exception as exc:  # the driver's errors: a refusing server, a missing table
        raise CompareError(f"--save: cannot write the report to {store.location}: {exc}") from exc
    if args.json != "-":
        print(f"saved as comparison {report_id} in {store.location} (tenant {args.tenant})")


def _ids(ids: tuple[str, ...], k: int) -> str:
    return ", ".join(ids[:k]) + (f" … +{len(ids) - k}" if len(ids) > k else "")


def _esc(text: str) -> str:
    """Query ids, release and metric names are untrusted: never let them be read as rich markup, nor
    their control characters by the terminal (rich passes an escape sequence through)."""
    from rich.markup import escape

    return escape(printable(text))


#: what `--server` means to the other commands, and why compare has none
_NO_SERVER_MODE = ("compare has no --server mode: it reads the labels of releases from --store, or per-trace "
                   "files. While `ragtrace serve` owns an embedded store, write the files through it (`ragtrace "
                   "audit --server URL --release R --per-trace R.jsonl`) and compare those. --server-url URL only "
                   "links the HTML report's trace ids to that server")


def compare_main(argv: list[str]) -> int:
    parser = build_parser()
    if any(arg == "--server" or arg.startswith("--server=") for arg in argv):
        parser.print_usage(sys.stderr)
        print(f"ragtrace compare: error: {_NO_SERVER_MODE}", file=sys.stderr)
        return 2
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors and 0 on --help
        return int(exc.code or 0)
    if args.resamples < 100:
        parser.print_usage(sys.stderr)
        print("ragtrace compare: error: --resamples must be at least 100", file=sys.stderr)
        return 2
    if not 0.5 <= args.confidence < 1:
        print("ragtrace compare: error: --confidence must be in [0.5, 1)", file=sys.stderr)
        return 2
    if args.html:
        from ragtrace_evaluator.compare.report_html import trace_link_template

        try:
            trace_link_template(args.server_url, args.trace_url)
        except ValueError as exc:
            print(f"ragtrace compare: error: {exc}", file=sys.stderr)
            return 2
    store_box: list[Any] = []
    try:
        baseline, candidate = load_sides(args, store_box)
        forced = check_manifests(baseline, candidate, force=args.force)
        gates = None
        if args.gates:
            # Validate the file before the (long) bootstrap; metric names are checked after it.
            gates = load_gates(args.gates, available=_available_metrics(baseline, candidate))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # every warning is on the report and printed below
            result = compare(baseline, candidate, threshold=args.threshold, n_resamples=args.resamples,
                             confidence_level=args.confidence, seed=args.seed, gates=gates,
                             min_change=args.min_change)
        if args.save:
            # while the store is open (it is closed below); the saved report is the one printed
            _save(args, store_box, (_with_notes(result, forced) if forced else result).to_json(),
                  (*baseline.manifest_ids, *candidate.manifest_ids))
    except CompareError as exc:
        print(f"ragtrace compare: error: {exc}", file=sys.stderr)
        return 2
    finally:
        for st in store_box:
            st.close()
    if forced:
        result = _with_notes(result, forced)
    report = result.to_json()
    try:
        if args.json:
            text = json.dumps(report, indent=2, allow_nan=False)
            if args.json == "-":
                print(text)
            else:
                Path(args.json).write_text(text + "\n", encoding="utf-8")
        if args.json != "-":
            render_terminal(result, report, max_ids=args.max_ids)
        if args.html:
            from ragtrace_evaluator.compare.report_html import write_report

            write_report(result, args.html, trace_url=args.trace_url, server_url=args.server_url)
            if args.json != "-":
                print(f"HTML report: {Path(args.html).resolve()}")
    except OSError as exc:
        print(f"ragtrace compare: error: cannot write {exc.filename or 'the report'}: {exc.strerror or exc}",
              file=sys.stderr)
        return 2
    return 1 if result.tripped else 0


def _available_metrics(a: LabelSet, b: LabelSet) -> set[str]:
    """Metric names the comparison will have, for gates that include the defaults."""
    names = {"gold_in_context", "pass_rate"} | {DECOMP_PREFIX + "p_pass_given_gold"}
    for lab in (*a.labels, *b.labels):
        names.update("abstention_rate" if k == "abstained" else k for k in lab.metrics)
        if lab.ranking_ok is not None:
            names.add("ranking_ok")
    return names


def _with_notes(c: Comparison, notes: list[str]) -> Comparison:
    from dataclasses import replace

    return replace(c, notes=(*notes, *c.notes))
