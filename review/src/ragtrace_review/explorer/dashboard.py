"""``/dashboard``: how the failure-mode mix, abstention, gold-in-context and groundedness move per
release over days (or hours), and the latest saved comparison's gates.

Same login, tenant and Content-Security-Policy as ``/review``. Numbers come from
`ragtrace_review.explorer.series` (n and a 95% interval for every point), charts from
`ragtrace_review.explorer.svgplot`; each point links to ``/traces`` filtered to the traces behind it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from fastapi import APIRouter, Request
from fastapi.responses import Response
from markupsafe import Markup

from ragtrace_review.deps import RendererDep, SessionDep, StoreDep
from ragtrace_review.errors import ReviewError
from ragtrace_review.explorer.drift_view import VERDICT_WORDS, AnchorRates, anchor_rates, drift_rows
from ragtrace_review.explorer.filters import blank, check_manifest, time_window
from ragtrace_review.explorer.series import BUCKETS, Bucket, Mean, Rate, Series, dashboard_series
from ragtrace_review.explorer.svgplot import Line, Point, Reference, chart, nice_top
from ragtrace_review.explorer.trace_list import filter_options, list_manifests, utc_iso
from ragtrace_review.links import DASHBOARD, TRACES, url
from ragtrace_store import FAILURE_MODES
from ragtrace_store.compare_reports import latest_compare_report

__all__ = ["Panel", "panels", "router"]

#: colours of the releases, in order of first appearance (review.css: .series-0 ... .series-7)
N_COLOURS = 8


@dataclass(frozen=True)
class Panel:
    key: str
    title: str
    hint: str
    svg: Markup


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v * 100:.1f}%"


def _rate_title(release: str, when: str, what: str, r: Rate, click: str) -> str:
    if r.value is None:
        return f"{release} · {when}: {what} undefined (n=0)"
    return (f"{release} · {when}: {what} {r.k}/{r.n} = {_pct(r.value)} (95% CI {_pct(r.low)}–{_pct(r.high)}, "
            f"n={r.n}). Click: {click}")


def _mean_title(release: str, when: str, m: Mean) -> str:
    if m.value is None:
        return f"{release} · {when}: groundedness undefined (n=0 answers with claims)"
    ci = f"95% CI {m.low:.2f}–{m.high:.2f}" if m.low is not None and m.high is not None else "no CI for n < 2"
    return f"{release} · {when}: mean groundedness {m.value:.2f} ({ci}, n={m.n}). Click: the bucket's traces"


def panels(series: Series, link: Callable[..., str], anchors: Sequence[AnchorRates] = ()) -> list[Panel]:
    """One chart per statistic; ``link(bucket, **filters)`` is the /traces URL of a point; each of
    ``anchors`` is a dashed reference line on the failure-mode charts."""
    css = {r: f"series-{i % N_COLOURS}" for i, r in enumerate(series.releases)}
    hourly = series.bucket == "hour"
    fmt = "%Y-%m-%d %H:00" if hourly else "%Y-%m-%d"

    def lines(pick: Callable[[Bucket], tuple[float | None, float | None, float | None, str, str]]) -> list[Line]:
        out = []
        for rel in series.releases:
            pts = []
            for b in series.buckets:
                if b.release != rel:
                    continue
                value, low, high, title, href = pick(b)
                if value is not None:  # an undefined point is left out, never drawn at 0
                    pts.append(Point(b.start, value, low, high, href, title))
            out.append(Line(rel, css[rel], tuple(pts)))
        return out

    def draw(key: str, title: str, hint: str, ls: list[Line], percent: bool = True, top: float | None = None,
             refs: Sequence[Reference] = ()) -> Panel:
        highs = [p.high if p.high is not None else p.y for ln in ls for p in ln.points] + [r.y for r in refs]
        y_top = top if top is not None else nice_top(highs)
        return Panel(key, title, hint, chart(ls, starts=series.starts, step=series.step, label=title, y_top=y_top,
                                             percent=percent, hourly=hourly, references=refs))

    def anchor_lines(mode: str) -> list[Reference]:
        return [Reference(y, a.title(mode)) for a in anchors if (y := a.rate(mode)) is not None]

    def mode_point(mode: str) -> Callable[[Bucket], tuple[float | None, float | None, float | None, str, str]]:
        name = mode.replace("_", " ")

        def pick(b: Bucket) -> tuple[float | None, float | None, float | None, str, str]:
            r = b.modes[mode]
            return (r.value, r.low, r.high,
                    _rate_title(b.release, b.start.strftime(fmt), name, r, f"the {r.k} {name} traces"),
                    link(b, mode=mode))
        return pick

    out = [draw(f"mode-{mode}", f"{mode.replace('_', ' ')} rate", "share of complete labelled traces"
                + (" · dashed: the anchor" if anchors else ""), lines(mode_point(mode)), refs=anchor_lines(mode))
           for mode in FAILURE_MODES]
    if any(b.incomplete.k for b in series.buckets):  # shown only where the audit found any
        out.append(draw("incomplete", "incomplete", "share of labelled traces that lost attributes or a stage "
                        "(no failure mode)", lines(
            lambda b: (b.incomplete.value, b.incomplete.low, b.incomplete.high,
                       _rate_title(b.release, b.start.strftime(fmt), "incomplete", b.incomplete,
                                   f"the {b.incomplete.k} incomplete traces"), link(b, incomplete="yes")))))
    out.append(draw("abstention", "abstention rate", "share of judged answers that abstained", lines(
        lambda b: (b.abstention.value, b.abstention.low, b.abstention.high,
                   _rate_title(b.release, b.start.strftime(fmt), "abstained", b.abstention,
                               f"the {b.abstention.k} abstentions"), link(b, generation="abstained")))))
    out.append(draw("gold-in-context", "gold in context", "share of traces with known gold whose gold reached "
                    "the context", lines(
        lambda b: (b.gold_in_context.value, b.gold_in_context.low, b.gold_in_context.high,
                   _rate_title(b.release, b.start.strftime(fmt), "gold in context", b.gold_in_context,
                               f"the {b.gold_in_context.n - b.gold_in_context.k} traces whose gold missed the "
                               "context"), link(b, gold_in_context="no"))), top=1.0))
    out.append(draw("groundedness", "groundedness", "mean over answers with claims", lines(
        lambda b: (b.groundedness.value, b.groundedness.low, b.groundedness.high,
                   _mean_title(b.release, b.start.strftime(fmt), b.groundedness), link(b))),
        percent=False, top=1.0))
    return out


router = APIRouter(include_in_schema=False)


@router.get(DASHBOARD)
def dashboard_page(request: Request, session: SessionDep, store: StoreDep, renderer: RendererDep) -> Response:
    tenant = session.reviewer.tenant
    raw = {k: blank(request.query_params.get(k))
           for k in ("release", "service", "since", "until", "bucket", "manifest")}
    manifests = list_manifests(store, tenant)
    manifest = raw["manifest"] or (manifests[0].manifest_id if manifests else None)
    error, series = None, None
    anchors: list[AnchorRates] = []
    since: datetime | None = None
    until: datetime | None = None
    try:
        check_manifest(raw["manifest"], [m.manifest_id for m in manifests])
        since, until = time_window(raw["since"], raw["until"])
        series = dashboard_series(store, tenant=tenant, manifest_id=manifest, release=raw["release"],
                                  service=raw["service"], since=since, until=until,
                                  bucket=raw["bucket"] or "auto")
        anchors = anchor_rates(store, tenant=tenant, manifest_id=manifest, service=raw["service"])
    except (ReviewError, ValueError) as exc:
        error = str(exc)

    def link(b: Bucket, **filters: str) -> str:
        # the point's own window, clipped to the dashboard's, so the list holds exactly its traces
        lo = max(b.start, since) if since else b.start
        hi = min(b.end, until) if until else b.end
        return url(TRACES, {"release": b.release, "service": raw["service"], "since": utc_iso(lo),
                            "until": utc_iso(hi), "manifest": manifest, **filters})

    return renderer.page(
        "dashboard.html", session, 400 if error else 200, error=error, series=series,
        panels=panels(series, link, anchors) if series and series.buckets else [], params=raw,
        drift=drift_rows(store, tenant=tenant, manifest_id=manifest, service=raw["service"]), anchors=anchors,
        verdict_words=VERDICT_WORDS,
        manifests=manifests, manifest=manifest, options=filter_options(store, tenant), buckets=BUCKETS,
        compare=latest_compare_report(store, tenant=tenant), n_colours=N_COLOURS, modes=FAILURE_MODES,
        pct=_pct)
