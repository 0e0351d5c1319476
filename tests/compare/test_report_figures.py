"""The HTML report's plots, measured where matplotlib draws them: nothing is drawn over anything else
in the decomposition chart, whatever the sizes of its terms, no legend lies over a panel, and the
deltas plot colours every significant change by the rule its axis states (the tables' classes follow
the same rule)."""

from __future__ import annotations

from typing import Any

import pytest
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.transforms import Bbox

from ragtrace_evaluator.compare.comparison import Comparison, compare
from ragtrace_evaluator.compare.records import label_set, parse_record
from ragtrace_evaluator.compare.report_html import (
    cells_figure,
    decomposition_figure,
    delta_rows,
    deltas_figure,
    modes_figure,
    render_report,
    scores_figure,
)
from ragtrace_evaluator.compare.significance import significance

from .story import story_records

RED, GREEN, PURPLE, BLACK = "#c44e52", "#2e8b57", "#8172b3", "#333333"


@pytest.fixture(scope="module")
def story() -> Comparison:
    base, cand = story_records()
    a = label_set("v1", "file", [parse_record(r) for r in base])
    b = label_set("v2", "file", [parse_record(r) for r in cand])
    return compare(a, b, n_resamples=500, seed=1, warn=False)


@pytest.fixture(scope="module")
def story_report(story: Comparison) -> dict[str, Any]:
    return story.to_json()


def _decomposition(terms: dict[str, tuple[float, float]]) -> dict[str, Any]:
    """A report's decomposition block with the given (term_gold, term_without_gold) per side."""
    out: dict[str, Any] = {}
    for side, (tg, tn) in terms.items():
        recall = min(1.0, tg + 0.1)
        out[side] = {"term_gold": tg, "term_without_gold": tn, "e2e": tg + tn, "recall": recall,
                     "p_pass_given_gold": tg / recall if recall else None,
                     "p_pass_without_gold": tn / (1 - recall) if recall < 1 else None}
    return {"decomposition": out}


def _overlap(a: Bbox, b: Bbox) -> float:
    """Area (px²) two boxes share; a shared edge is not an overlap."""
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    return max(0.0, w) * max(0.0, h)


def _inside(inner: Bbox, outer: Bbox, slack: float = 0.5) -> bool:
    return (inner.x0 >= outer.x0 - slack and inner.x1 <= outer.x1 + slack and inner.y0 >= outer.y0 - slack
            and inner.y1 <= outer.y1 + slack)


def _layout_problems(fig: Figure) -> list[str]:
    """Everything drawn over something else in the decomposition figure, in words (empty: none)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    stacked, factors = fig.axes
    legend = fig.legends[0].get_window_extent(renderer)
    bars = [(ax.title.get_text(), p.get_window_extent(renderer)) for ax in fig.axes for p in ax.patches
            if p.get_height() > 0]
    labels: list[tuple[str, Bbox, str]] = []  # what is written: text, its box, its colour
    for ax in fig.axes:
        (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
        # the locator's ticks beyond the axis' limits are not drawn
        ticks = [*(t for t in ax.get_xticklabels() if x0 <= t.get_position()[0] <= x1),
                 *(t for t in ax.get_yticklabels() if y0 <= t.get_position()[1] <= y1)]
        for t in [*ax.texts, *ticks, ax.title]:
            if t.get_text():
                labels.append((t.get_text(), t.get_window_extent(renderer), to_hex(t.get_color())))
    problems = []
    for i, (text, box, _) in enumerate(labels):
        if not _inside(box, fig.bbox):
            problems.append(f"{text!r} is cut off by the figure's edge")
        if _overlap(box, legend) > 1:
            problems.append(f"the legend is drawn over {text!r}")
        for other, other_box, _ in labels[i + 1:]:
            if _overlap(box, other_box) > 1:
                problems.append(f"{text!r} and {other!r} are drawn over each other")
    for where, bar in bars:
        if _overlap(bar, legend) > 1:
            problems.append(f"the legend is drawn over a bar of {where!r}")
    # a value in white must sit inside its bar (else it is white on white); any other text on no bar
    for t in stacked.texts:
        box = t.get_window_extent(renderer)
        on = [bar for where, bar in bars if where == stacked.title.get_text() and _overlap(box, bar) > 1]
        if to_hex(t.get_color()) == "#ffffff":
            if not any(_inside(box, bar) for bar in on):
                problems.append(f"the white value {t.get_text()!r} is not inside its bar")
        elif on:
            problems.append(f"{t.get_text()!r} is drawn over a bar")
    assert factors.get_legend() is None  # the one legend is the figure's, under both panels
    return problems


@pytest.mark.parametrize("terms", [
    {"baseline": (0.6975, 0.0825), "candidate": (0.615, 0.1725)},  # the story's
    {"baseline": (0.70, 0.012), "candidate": (0.52, 0.006)},       # the demo's: few pass without gold
    {"baseline": (0.02, 0.03), "candidate": (0.0, 0.0)},           # almost nothing passes
    {"baseline": (0.95, 0.05), "candidate": (0.05, 0.95)},         # everything passes
    {"baseline": (0.5, 0.0), "candidate": (0.089, 0.091)},         # both sides of the inside threshold
])
def test_the_decomposition_chart_draws_nothing_over_anything(terms: dict[str, tuple[float, float]]) -> None:
    fig = decomposition_figure(_decomposition(terms), ("v1", "release-2024-candidate"))
    assert _layout_problems(fig) == []
    # every value is written once, and each release's total above its bar
    texts = [t.get_text() for t in fig.axes[0].texts]
    for tg, tn in terms.values():
        assert f"{tg:.3f}" in texts and f"{tn:.3f}" in texts and f"e2e {tg + tn:.3f}" in texts


def test_the_story_decomposition_has_its_legend_off_the_bars(story_report: dict[str, Any]) -> None:
    assert _layout_problems(decomposition_figure(story_report, ("v1", "v2"))) == []


def test_no_legend_lies_over_a_panel(story: Comparison, story_report: dict[str, Any]) -> None:
    # a legend inside a panel ("best" placement) covers bars whenever the data fill that corner:
    # every legend of the report is the figure's own, beside the panels
    figures = {"modes": modes_figure(story_report), "decomposition": decomposition_figure(story_report, ("v1", "v2")),
               "cells": cells_figure(story_report), "scores": scores_figure(story)}
    for name, fig in figures.items():
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
        assert len(fig.legends) == 1 and all(ax.get_legend() is None for ax in fig.axes), name
        legend = fig.legends[0].get_window_extent(renderer)
        assert _inside(legend, fig.bbox), name
        for ax in fig.axes:
            assert _overlap(legend, ax.get_window_extent(renderer)) == 0, name
            for label in ax.get_xticklabels():
                assert _overlap(legend, label.get_window_extent(renderer)) <= 1, (name, label.get_text())
        assert _overlap(legend, fig.axes[0].xaxis.label.get_window_extent(renderer)) <= 1, name


def test_every_significant_change_is_coloured_by_the_stated_rule(story_report: dict[str, Any]) -> None:
    rows = {r["metric"]: r for r in delta_rows(story_report)}
    # the gold term fell with recall: worse, and drawn red like recall itself
    assert rows["decomposition.term_gold"]["significance"] == "worse"
    assert rows["recall_5"]["significance"] == "worse"
    # the other term rose significantly, but it has no better direction: drawn as changed, not as flat
    assert rows["decomposition.term_without_gold"]["significance"] == "changed"
    assert rows["pass_rate"]["significance"] == "flat"

    fig = deltas_figure(story_report)
    ax = fig.axes[0]
    names = [t.get_text() for t in ax.get_yticklabels()]  # bottom to top, as the points are drawn
    points = [line for line in ax.lines if line.get_marker() == "o"]
    colour = {name: to_hex(p.get_color()) for name, p in zip(names, points, strict=True)}
    expected = {"worse": RED, "better": GREEN, "changed": PURPLE, "flat": BLACK}
    for name, row in rows.items():
        assert colour[name] == expected[row["significance"]], name
    assert "red = significantly worse" in ax.get_xlabel() and "purple = changed" in ax.get_xlabel()


def test_the_rule(story_report: dict[str, Any]) -> None:
    assert significance(-0.1, [-0.2, -0.05], "higher") == "worse"
    assert significance(-0.1, [-0.2, -0.05], "lower") == "better"
    assert significance(0.1, [0.05, 0.2], "lower") == "worse"
    assert significance(0.1, [0.05, 0.2], None) == "changed"
    assert significance(0.1, [0.0, 0.2], None) == "flat"      # an interval that reaches 0 holds it
    assert significance(0.1, [None, None], "higher") == "flat"  # no interval: not shown as significant
    assert significance(None, [None, None], "higher") == "undefined"
    with pytest.raises(ValueError, match="direction"):
        significance(0.1, [0.05, 0.2], "up")


def test_abstention_rate_that_moved_is_marked_changed_in_the_tables() -> None:
    # the demo's candidate abstains on the questions it should answer: its abstention rate rises
    # significantly, which has no better direction (an abstention may be right)
    base, cand = story_records()
    for i, rec in enumerate(cand):
        if i % 4 == 0:
            rec["metrics"]["abstained"] = 1.0
    a = label_set("v1", "file", [parse_record(r) for r in base])
    b = label_set("v2", "file", [parse_record(r) for r in cand])
    c = compare(a, b, n_resamples=400, seed=1, warn=False)
    row = next(r for r in delta_rows(c.to_json()) if r["metric"] == "abstention_rate")
    assert row["significance"] == "changed"
    html = render_report(c)
    assert '<tr class="changed"><td>abstention_rate</td>' in html
    # and the decomposition's table rows follow the rule too
    assert '<tr class="bad"><td>recall · P(pass | gold in C)</td>' in html
    assert '<tr class="changed"><td>(1 − recall) · P(pass | no gold in C)</td>' in html
