"""The self-contained HTML report of `ragtrace compare`.

One file, viewable offline: no script, no stylesheet or font from the network. The plots are drawn
by matplotlib and embedded as base64 SVG images (``<img src="data:image/svg+xml;base64,…">``); an
SVG inside an image cannot run script, so even a hostile release name in a legend is inert. Every
other string — query ids, trace ids, release names, warnings — is untrusted and goes through
Jinja2's autoescape.
"""

from __future__ import annotations

import base64
import io
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ragtrace_evaluator.compare.metric_info import DECOMP_PREFIX, metric_info
from ragtrace_evaluator.compare.modes import MEANING
from ragtrace_evaluator.compare.significance import Significance, significance

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from ragtrace_evaluator.compare.comparison import Comparison

__all__ = ["cells_figure", "decomposition_figure", "delta_rows", "deltas_figure", "modes_figure", "render_report",
           "scores_figure", "write_report"]

_BASE = "#4c72b0"
_CAND = "#dd8452"
#: a change's colour in the plots, by `significance` (the tables' classes follow the same rule)
_COLOURS: dict[Significance, str] = {"worse": "#c44e52", "better": "#2e8b57", "changed": "#8172b3",
                                     "flat": "#333333", "undefined": "#333333"}
_RULE = "red = significantly worse, green = better, purple = changed, no better direction"
#: a term of the decomposition bar shorter than this (in shares) gets its value beside the bar, not in it
_MIN_INSIDE = 0.09


def _svg(fig: Any) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return "data:image/svg+xml;base64," + base64.b64encode(buf.getvalue().encode("utf-8")).decode("ascii")


def _finite(x: Any) -> bool:
    return isinstance(x, int | float) and math.isfinite(x)


def _interval(ci: dict[str, Any]) -> list[Any]:
    """The BCa interval, or the percentile one where BCa is undefined (as the plots draw it)."""
    chosen: list[Any] = ci["bca"] if ci["bca"][0] is not None else ci["percentile"]
    return chosen


def delta_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of the deltas plot, top to bottom: every stage metric with a delta, then the two
    terms of the decomposition, each with the interval drawn and its `significance`."""
    rows = [{"metric": m["metric"], "delta": m["delta"], "ci": _interval(m["ci"]), "direction": m["direction"]}
            for m in report["metrics"] if _finite(m["delta"])]
    d = report["decomposition"]
    rows += [{"metric": DECOMP_PREFIX + k, "delta": d["delta"][k], "ci": _interval(d["ci"][k]),
              "direction": metric_info(DECOMP_PREFIX + k)[1]}
             for k in ("term_gold", "term_without_gold") if _finite(d["delta"][k])]
    for row in rows:
        row["significance"] = significance(row["delta"], row["ci"], row["direction"])
    return rows


def deltas_figure(report: dict[str, Any]) -> Figure:
    """Each delta with its interval, coloured by `significance`."""
    import matplotlib.pyplot as plt

    rows = delta_rows(report)
    fig, ax = plt.subplots(figsize=(8, 0.38 * len(rows) + 1.2))
    for i, m in enumerate(reversed(rows)):
        lo, hi = m["ci"]
        color = _COLOURS[m["significance"]]
        if lo is not None and hi is not None:
            ax.plot([lo, hi], [i, i], color=color, lw=2)
        ax.plot([m["delta"]], [i], "o", color=color)
    ax.axvline(0, color="#999999", lw=1, ls="--")
    ax.set_yticks(range(len(rows)), [m["metric"] for m in reversed(rows)])
    ax.set_xlabel(f"candidate − baseline (95% paired bootstrap CI)\n{_RULE}")
    ax.set_title("Deltas with confidence intervals")
    return fig


def modes_figure(report: dict[str, Any]) -> Figure:
    """Each mode's rate side by side, and its paired delta with the interval (red: worse)."""
    import matplotlib.pyplot as plt

    rows = report["failure_modes"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 0.45 * len(rows) + 1.9), sharey=True, layout="constrained")
    ys = list(range(len(rows)))[::-1]
    labels = [m["mode"] for m in rows]
    ax1.barh([y + 0.2 for y in ys], [m["baseline"] or 0.0 for m in rows], 0.4, color=_BASE, label="baseline")
    ax1.barh([y - 0.2 for y in ys], [m["candidate"] or 0.0 for m in rows], 0.4, color=_CAND, label="candidate")
    ax1.set_yticks(ys, labels)
    ax1.set_xlabel("share of paired queries")
    ax1.set_title("Failure-mode rates")
    _legend_below(fig, ncol=2)
    for y, m in zip(ys, rows, strict=True):
        lo, hi = _interval(m["ci95"])
        color = _COLOURS[significance(m["delta"], [lo, hi], m["direction"])]
        if lo is not None and hi is not None:
            ax2.plot([lo, hi], [y, y], color=color, lw=2)
        if _finite(m["delta"]):
            ax2.plot([m["delta"]], [y], "o", color=color)
        else:  # an undefined delta gets a word, not a point at 0
            ax2.text(0, y, "undefined", ha="center", va="center", fontsize=8)
    ax2.axvline(0, color="#999999", lw=1, ls="--")
    ax2.tick_params(labelleft=False)  # the mode names are on the left panel
    ax2.set_xlabel("candidate − baseline (95% paired CI)\nred = worse, green = better, purple = changed")
    ax2.set_title("Paired difference")
    return fig


def _plot_surface(c: Comparison) -> str:
    """Each paired query at (Δsurface, Δgrounding); the surface-up / grounding-down quadrant in red."""
    import matplotlib.pyplot as plt

    sg = c.surface
    assert sg is not None and sg.available
    fig, ax = plt.subplots(figsize=(6.5, 5))
    movers = {(a, b) for a, b in zip(sg.quadrant("surface_up_grounding_down").delta_surface,
                                     sg.quadrant("surface_up_grounding_down").delta_grounding, strict=True)}
    xs = [d[0] for d in sg.deltas]
    ys = [d[1] for d in sg.deltas]
    colors = ["#c44e52" if d in movers else "#4c72b0" for d in sg.deltas]
    ax.scatter(xs, ys, c=colors, s=14, alpha=0.6, linewidths=0)
    lim = max([0.1, *map(abs, xs), *map(abs, ys)]) * 1.08
    m = sg.min_change
    ax.axvspan(m, lim, ymin=0, ymax=(lim - m) / (2 * lim), color="#c44e52", alpha=0.08)
    for v in (-m, m):
        ax.axvline(v, color="#999999", lw=0.8, ls=":")
        ax.axhline(v, color="#999999", lw=0.8, ls=":")
    ax.axvline(0, color="#666666", lw=1)
    ax.axhline(0, color="#666666", lw=1)
    ax.set_xlim(-lim, lim)
    ax.set_ylim(-lim, lim)
    ax.set_xlabel(f"Δ {sg.surface_metric} (candidate − baseline, vs the reference)")
    ax.set_ylabel("Δ groundedness (candidate − baseline)")
    ax.set_title(f"Surface × grounding per query (n = {sg.n}; red: surface up, grounding down)")
    return _svg(fig)


def decomposition_figure(report: dict[str, Any], names: tuple[str, str]) -> Figure:
    """Left: each release's e2e pass rate as its two terms stacked, the total above the bar. Right:
    the four factors side by side. Nothing is drawn over anything else: a term too short to hold its
    value has it beside the bar (the gold term to the left, the other to the right), and the legend
    sits under both panels, outside the bars."""
    import matplotlib.pyplot as plt

    d = report["decomposition"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4.4), layout="constrained")
    sides = ("baseline", "candidate")
    tg = [d[s]["term_gold"] or 0.0 for s in sides]
    tn = [d[s]["term_without_gold"] or 0.0 for s in sides]
    width = 0.5
    ax1.bar([0, 1], tg, width, color="#55a868", label="recall · P(pass | gold in C)")
    ax1.bar([0, 1], tn, width, bottom=tg, color="#c44e52", label="(1 − recall) · P(pass | no gold in C)")
    for i in range(2):
        ax1.annotate(f"e2e {tg[i] + tn[i]:.3f}", (i, tg[i] + tn[i]), xytext=(0, 3), textcoords="offset points",
                     ha="center", va="bottom", fontweight="bold")
        for value, bottom, toward in ((tg[i], 0.0, -1), (tn[i], tg[i], 1)):
            middle = bottom + value / 2
            if value >= _MIN_INSIDE:
                ax1.text(i, middle, f"{value:.3f}", ha="center", va="center", color="white")
            else:  # too short to hold its value: beside the bar, left for one term, right for the other
                ax1.annotate(f"{value:.3f}", (i + toward * width / 2, middle), xytext=(toward * 3, 0),
                             textcoords="offset points", ha="left" if toward > 0 else "right", va="center",
                             fontsize=9, color="#333333")
    ax1.set_xticks([0, 1], [f"baseline\n{names[0][:30]}", f"candidate\n{names[1][:30]}"])
    ax1.set_xlim(-0.9, 1.9)
    ax1.set_ylim(0, 1.15)  # room for the e2e label above a bar of 1.0
    ax1.set_title("e2e pass = the two terms")
    keys = [("recall", "recall"), ("p_pass_given_gold", "P(pass |\ngold in C)"),
            ("p_pass_without_gold", "P(pass |\nno gold)"), ("e2e", "e2e")]
    xs = range(len(keys))
    ax2.bar([x - 0.2 for x in xs], [d["baseline"][k] or 0.0 for k, _ in keys], 0.4, color=_BASE,
            label="baseline")
    ax2.bar([x + 0.2 for x in xs], [d["candidate"][k] or 0.0 for k, _ in keys], 0.4, color=_CAND,
            label="candidate")
    for j, (k, _) in enumerate(keys):  # an undefined factor has no bar: say so rather than look like 0
        for off, side in ((-0.2, "baseline"), (0.2, "candidate")):
            if d[side][k] is None:
                ax2.text(j + off, 0.02, "undefined", rotation=90, ha="center", va="bottom", fontsize=8)
    ax2.set_xticks(list(xs), [label for _, label in keys])
    ax2.set_ylim(0, 1.05)
    ax2.set_title("Factors")
    _legend_below(fig, ncol=2)  # the terms in the first column, the releases in the second
    return fig


def cells_figure(report: dict[str, Any]) -> Figure:
    import matplotlib.pyplot as plt

    cells = report["contingency"]
    fig, ax = plt.subplots(figsize=(8, 0.42 * len(cells) + 1.5), layout="constrained")
    ys = list(range(len(cells)))[::-1]
    ax.barh([y + 0.2 for y in ys], [c["baseline"] or 0.0 for c in cells], 0.4, color=_BASE, label="baseline")
    ax.barh([y - 0.2 for y in ys], [c["candidate"] or 0.0 for c in cells], 0.4, color=_CAND, label="candidate")
    ax.set_yticks(ys, [c["cell"] for c in cells], fontsize=8)
    ax.set_xlabel("share of paired queries")
    ax.set_title("Contingency cells, side by side")
    _legend_below(fig, ncol=2)
    return fig


def scores_figure(c: Comparison) -> Figure:
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(8, 3.7), layout="constrained")
    bins = [float(x) for x in np.linspace(0.0, 1.0, 26)]
    for side, color in (("baseline", _BASE), ("candidate", _CAND)):
        vals = c.scores(side)
        vals = vals[np.isfinite(vals)]
        ax.hist(vals, bins=bins, histtype="step", lw=2, color=color, label=f"{side} (n = {len(vals)})")
    ax.axvline(c.threshold, color="#c44e52", ls="--", lw=1.5, label=f"threshold {c.threshold:g}")
    has_score = any(lab.score is not None for lab in (*c.pairing.baseline, *c.pairing.candidate))
    ax.set_xlabel("end-to-end score (queries with a score)" if has_score else "pass (1) / fail (0): no scores")
    ax.set_ylabel("queries")
    ax.set_title("Score distributions")
    _legend_below(fig, ncol=3)
    return fig


def _legend_below(fig: Figure, ncol: int) -> None:
    """One legend for the whole figure, under its panels (constrained layout keeps room for it), so
    it is never drawn over a bar or a line, wherever the data put them."""
    handles: list[Any] = []
    labels: list[str] = []
    for ax in fig.axes:
        h, lab = ax.get_legend_handles_labels()
        handles += h
        labels += lab
    fig.legend(handles, labels, loc="outside lower center", ncol=ncol, fontsize=8, frameon=False)


#: a table row's CSS class by `significance` (the template's stylesheet colours them)
_CLASSES: dict[Significance, str] = {"worse": "bad", "better": "good", "changed": "changed", "flat": "",
                                     "undefined": "undef"}


def _template_text() -> str:
    from importlib import resources

    return resources.files("ragtrace_evaluator.compare").joinpath("templates/compare_report.html").read_text("utf-8")



def trace_link_template(server_url: str | None = None, trace_url: str | None = None) -> str | None:
    """The link of a trace's page: ``trace_url`` as given (a template with ``{trace_id}``), else the
    trace page of the server at ``server_url`` (``URL/traces/{trace_id}``), else None (no server:
    the report shows the ``ragtrace traces show ID`` command instead)."""
    if trace_url:
        if "{trace_id}" not in trace_url:
            raise ValueError(f"--trace-url {trace_url!r} has no {{trace_id}} placeholder; e.g. "
                             "http://host:4318/traces/{trace_id}, or give --server-url http://host:4318")
        return trace_url
    if server_url:
        if not server_url.startswith(("http://", "https://")):
            raise ValueError(f"--server-url {server_url!r}: give the base URL of `ragtrace serve`, e.g. "
                             "http://host:4318")
        return server_url.rstrip("/") + "/traces/{trace_id}"
    return None


def render_report(c: Comparison, *, trace_url: str | None = None, server_url: str | None = None) -> str:
    """The HTML text. Trace ids link to their page on ``server_url`` (``URL/traces/ID``) or to the
    ``trace_url`` template (e.g. ``http://host:4318/traces/{trace_id}``); without either each one
    shows its ``ragtrace traces show ID`` command."""
    trace_url = trace_link_template(server_url, trace_url)
    import jinja2
    import matplotlib

    matplotlib.use("Agg", force=False)
    from markupsafe import Markup, escape

    report = c.to_json()
    plots = {
        "modes": _svg(modes_figure(report)) if report["failure_modes"] else "",
        "surface": _plot_surface(c) if c.surface is not None and c.surface.available else "",
        "deltas": _svg(deltas_figure(report)),
        "decomposition": _svg(decomposition_figure(report, (c.baseline.name, c.candidate.name))),
        "cells": _svg(cells_figure(report)),
        "scores": _svg(scores_figure(c)),
    }

    def fmt(x: Any) -> str:
        return f"{x:.4f}" if _finite(x) else "undefined"

    def fmt_d(x: Any) -> str:
        return f"{x:+.4f}" if _finite(x) else "undefined"

    def fmt_ci(ci: list[Any]) -> str:
        return f"[{ci[0]:+.4f}, {ci[1]:+.4f}]" if _finite(ci[0]) and _finite(ci[1]) else "undefined"

    def pct(x: Any) -> str:
        return f"{100 * x:.2f}%" if _finite(x) else "undefined"

    def cls(m: dict[str, Any]) -> str:
        """A row's class by `significance` of its BCa interval (the plots colour by the same rule)."""
        return _CLASSES[significance(m["delta"], m["ci"]["bca"], m["direction"])]

    def link(trace_id: str) -> Markup:
        if not trace_id:
            return Markup("–")
        if trace_url:
            href = trace_url.replace("{trace_id}", quote(trace_id, safe=""))
            return Markup('<a class="trace" href="{}">{}</a>').format(href, trace_id)
        return escape(trace_id)

    def show(trace_id: str) -> Markup:
        """The command that shows a trace, for a report with no server to link to."""
        if not trace_id:
            return Markup("–")
        return Markup("<code>ragtrace traces show {}</code>").format(trace_id)

    def zip_surface(q: dict[str, Any]) -> list[tuple[str, str, str, float, float]]:
        return list(zip(q["query_ids"], q["baseline_trace_ids"], q["candidate_trace_ids"], q["delta_surface"],
                        q["delta_grounding"], strict=True))

    def zip_ids(t: dict[str, Any]) -> list[tuple[str, str, str]]:
        return list(zip(t["query_ids"], t["baseline_trace_ids"], t["candidate_trace_ids"], strict=True))

    def cell_id(a: str, b: str) -> str:
        return f"transition-{a}-{b}"

    def rows(mv: Any) -> list[tuple[str, str, str]]:
        return list(zip(mv.query_ids, mv.baseline_trace_ids, mv.candidate_trace_ids, strict=True))

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    template = env.from_string(_template_text())
    decomp_labels = [("recall", "recall (gold in context)"), ("p_pass_given_gold", "P(pass | gold in C)"),
                     ("p_pass_without_gold", "P(pass | no gold in C)"),
                     ("term_gold", "recall · P(pass | gold in C)"),
                     ("term_without_gold", "(1 − recall) · P(pass | no gold in C)"), ("e2e", "e2e pass")]
    def mode_cls(m: dict[str, Any]) -> str:
        return cls({"ci": m["ci95"], "direction": m["direction"], "delta": m["delta"]})

    changed = {(t["baseline"], t["candidate"]) for t in (report["failure_mode_transitions"] or {}).get("changed", [])}
    decomp_direction = {k: metric_info(DECOMP_PREFIX + k)[1] for k, _ in decomp_labels}
    # With a server every trace id is a link to its page, so no column repeats it as a command.
    linked = trace_url is not None
    return template.render(r=report, plots=plots, movers=c.movers, decomp_labels=decomp_labels,
                           decomp_direction=decomp_direction, linked=linked, fmt=fmt,
                           fmt_d=fmt_d, fmt_ci=fmt_ci, pct=pct, cls=cls, mode_cls=mode_cls, link=link, show=show,
                           rows=rows, cell_id=cell_id, changed=changed, zip_ids=zip_ids, zip_surface=zip_surface,
                           meaning=MEANING)


def write_report(c: Comparison, path: str | Path, *, trace_url: str | None = None,
                 server_url: str | None = None) -> Path:
    """Write the report to ``path`` (parents created) and return it."""
    text = render_report(c, trace_url=trace_url, server_url=server_url)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return out
