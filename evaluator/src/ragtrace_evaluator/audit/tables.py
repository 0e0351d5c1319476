"""Terminal tables of an audit report (rich): the same content as the JSON summary."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{100 * v:.1f}%"


def _ci(ci: list[float] | None) -> str:
    return "—" if not ci else f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def _num(v: float | None) -> str:
    return "—" if v is None else f"{v:.4f}"


def print_report(report: dict[str, Any], console: Console | None = None) -> None:
    con = console or Console()
    samp = report.get("sampling", {})
    con.print(f"[bold]ragtrace audit[/bold]  n={report['n']}  manifest={report['manifest_id']}  "
              f"labelled now={samp.get('n_labelled_now', '?')}  resumed={samp.get('n_resumed', '?')}  "
              f"candidates={samp.get('n_candidates', '?')}")

    modes = Table(title="Primary failure mode (95% Wilson CI)")
    for col in ("mode", "count", "rate", "95% CI"):
        modes.add_column(col, justify="left" if col == "mode" else "right")
    for mode, r in report["failure_modes"].items():
        modes.add_row(mode, str(r["count"]), _pct(r["rate"]), _ci(r["ci95"]))
    con.print(modes)
    inc = report.get("incomplete")
    if inc and inc["count"]:
        reasons = ", ".join(f"{k} {v}" for k, v in inc["reasons"].items())
        con.print(f"[bold]incomplete[/bold]: {inc['count']} of {inc['n']} traces ({_pct(inc['rate'])}) lost "
                  f"attributes or a stage and were not labelled ({reasons}); the modes above are over the rest. "
                  "See `ragtrace traces show TRACE_ID` for the reasons.")

    cont = report["contingency"]
    table = Table(title=f"Contingency: gold in pool × gold in context × generation (n={cont['n']})")
    table.add_column("gold in pool")
    table.add_column("gold in context")
    for cls in cont["generation_classes"]:
        table.add_column(cls, justify="right")
    rows: dict[tuple[bool, bool], dict[str, int]] = {}
    for cell in cont["cells"]:
        rows.setdefault((cell["gold_in_pool"], cell["gold_in_context"]), {})[cell["generation"]] = cell["n"]
    for (pool, ctx), cells in rows.items():
        table.add_row("yes" if pool else "no", "yes" if ctx else "no",
                      *(str(cells.get(c, 0)) for c in cont["generation_classes"]))
    con.print(table)
    if cont["n_unknown_gold"] or cont["n_unlabelled_generation"]:
        con.print(f"  not in the table: {cont['n_unknown_gold']} with unknown relevance, "
                  f"{cont['n_unlabelled_generation']} without a generation label")

    m = report["metrics"]
    stage = Table(title="Stage metrics")
    for col in ("stage", "metric", "value", "n", "undefined / 95% CI"):
        stage.add_column(col, justify="left" if col in ("stage", "metric") else "right")
    ret = m["retrieval"]
    for name in ("gold_in_pool", "gold_in_context"):
        stage.add_row("retrieval", name, _pct(ret[name]["rate"]), str(ret[name]["n"]), _ci(ret[name]["ci95"]))
    for name in ("recall_5", "precision_5", "recip_rank", "ndcg_cut_5", "success_5"):
        stage.add_row("retrieval", name, _num(ret[name]["mean"]), str(ret[name]["n"]), str(ret[name]["n_undefined"]))
    ok = m["ranking"]["ok"]
    stage.add_row("ranking", "best gold above distractors", _pct(ok["rate"]), str(ok["n"]), _ci(ok["ci95"]))
    gen = m["generation"]
    g = gen["groundedness"]
    stage.add_row("generation", "groundedness", _num(g["mean"]), str(g["n"]), str(g["n_undefined"]))
    stage.add_row("generation", "entailed", _pct(gen["entailed"]["rate"]), str(gen["entailed"]["n"]),
                  _ci(gen["entailed"]["ci95"]))
    e2e = m["e2e"]
    for name in ("pass", "pass_given_gold_in_context", "pass_given_no_gold_in_context"):
        stage.add_row("end to end", name, _pct(e2e[name]["rate"]), str(e2e[name]["n"]), _ci(e2e[name]["ci95"]))
    stage.add_row("end to end", "score", _num(e2e["score"]["mean"]), str(e2e["score"]["n"]),
                  str(e2e["score"]["n_undefined"]))
    con.print(stage)

    ab = report["abstention"]
    con.print(f"abstentions: {ab['count']} of {ab['n']} answers ({_pct(ab['rate'])}, 95% CI {_ci(ab['ci95'])}); "
              f"justified refusals {ab['justified']}, unjustified {ab['unjustified']}, unknown {ab['unknown']}")
    con.print(f"gold from: {', '.join(f'{k} {v}' for k, v in sorted(report['gold_sources'].items())) or '—'}")
    _print_selective(report.get("selective"), con)


def _print_selective(sel: dict[str, Any] | None, con: Console) -> None:
    """Selective labelling: per mode, the share labelled with confidence ≥ the review threshold, and
    what the labeller's benchmark measured there (precision of verdicts, coverage) on its dev sets."""
    if not sel or sel.get("review_threshold") is None:
        return
    t = sel["review_threshold"]
    table = Table(title=f"Selective labelling: confidence ≥ {t:g} labelled, the rest for review (95% Wilson CI)")
    for col in ("mode", "n", "confident", "share", "95% CI", "for review"):
        table.add_column(col, justify="left" if col == "mode" else "right")
    for mode, r in (sel.get("by_mode") or {}).items():
        table.add_row(mode, str(r["n"]), str(r["count"]), _pct(r["rate"]), _ci(r["ci95"]), str(r["for_review"]))
    a = sel["all"]
    table.add_row("all", str(a["n"]), str(a["count"]), _pct(a["rate"]), _ci(a["ci95"]), str(a["for_review"]))
    con.print(table)
    measured = sel.get("measured")
    if measured and measured.get("sets"):
        con.print("  measured at this threshold (" + measured.get("source", "benchmark") + "): " + "; ".join(
            f"{name}: verdicts right {_pct(m['accuracy'])} on {_pct(m['coverage'])} of n={m.get('n_items', m['n'])}"
            for name, m in measured["sets"].items()))
    elif measured is not None:
        con.print(f"  {measured.get('note', 'no measurement for this labeller')}")
