"""The HTML report in a real browser (Debian's chromium through Playwright): it renders its plots,
logs no console errors, needs no network, and shows hostile strings as text."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import pytest

from ragtrace_evaluator.compare.comparison import compare
from ragtrace_evaluator.compare.records import label_set, parse_record
from ragtrace_evaluator.compare.report_html import render_report, write_report
from tests.browser import chromium

from .story import story_records

HOSTILE_QUERY = '"><img src=x onerror=alert(1)>'
HOSTILE_RELEASE = "<script>alert('release')</script>"


@pytest.fixture(scope="module")
def comparison():
    base, cand = story_records()
    base[0]["query_id"] = cand[0]["query_id"] = HOSTILE_QUERY
    cand[0]["gold_in_context"] = False  # make sure it is listed among the movers
    base[0]["gold_in_context"] = True
    # a surface score against the reference beside groundedness, so the surface × grounding block renders:
    # the candidate's answers match the reference better on the queries whose grounding fell
    for a, b in zip(base, cand, strict=True):
        ga, gb = a["metrics"]["groundedness"], b["metrics"]["groundedness"]
        if ga is not None and gb is not None:
            a["metrics"]["token_f1"] = 0.5
            b["metrics"]["token_f1"] = 0.8 if gb < ga else 0.5
    a = label_set(HOSTILE_RELEASE, "file", [parse_record(r) for r in base])
    b = label_set("v2", "file", [parse_record(r) for r in cand])
    return compare(a, b, n_resamples=500, seed=1, warn=False)


def test_untrusted_strings_are_escaped_in_the_markup(comparison) -> None:
    html = render_report(comparison, server_url="http://collector.local/")
    assert HOSTILE_RELEASE not in html and HOSTILE_QUERY not in html
    assert "&lt;script&gt;alert(&#39;release&#39;)&lt;/script&gt;" in html
    assert "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in html
    # Trace ids become URL-encoded links when a template is given.
    assert 'href="http://collector.local/traces/v2-' in html
    assert "ragtrace traces show" not in html  # with a server every trace is a link to its page
    # Without one, every trace names the command that shows it.
    plain = render_report(comparison)
    assert "<code>ragtrace traces show v2-" in plain and 'class="trace"' not in plain
    assert "<script" not in html.lower()
    assert "http://" not in html.replace("http://collector.local/", "").replace("http://www.w3.org/", "")


@pytest.mark.browser
def test_report_renders_in_headless_chromium(comparison, tmp_path: Path) -> None:
    path = write_report(comparison, tmp_path / "report.html")
    errors: list[str] = []
    dialogs: list[str] = []
    requests: list[str] = []
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))

        def route(r):  # the report must be self-contained: any request off the file is a bug
            if not r.request.url.startswith(("file://", "data:")):
                requests.append(r.request.url)
                r.abort()
            else:
                r.continue_()

        page.route("**/*", route)
        page.goto(path.as_uri())
        page.wait_for_load_state("load")
        plots = page.evaluate(
            "() => Array.from(document.querySelectorAll('img.plot')).map(i => "
            "({id: i.id, ok: i.complete && i.naturalWidth > 100 && i.naturalHeight > 100}))")
        text = page.inner_text("body")
        n_scripts = page.evaluate("() => document.scripts.length")
        lost_rows = page.locator("#movers-gold_in_context-lost + div table tr").count()
        # the failure-mode table sits above the decomposition, and a transition count links to
        # the queries that made it
        tops = page.evaluate(
            "() => ['failure-modes', 'mode-transitions'].map(id => document.getElementById(id)"
            ".getBoundingClientRect().top).concat([Array.from(document.querySelectorAll('h2')).find("
            "h => h.textContent === 'Decomposition').getBoundingClientRect().top])")
        mode_rows = page.locator("#failure-mode-table tr").count()
        first = page.locator("#transition-matrix a").first
        target = first.get_attribute("href")
        first.click()
        shown = page.locator(f"{target} + div table tr").count()
        heading = page.inner_text(target)
        page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
    assert errors == [] and dialogs == [] and requests == []
    assert {p["id"] for p in plots} == {"plot-modes", "plot-surface", "plot-decomposition", "plot-deltas",
                                        "plot-scores", "plot-cells"}
    assert all(p["ok"] for p in plots), plots
    assert n_scripts == 0
    assert HOSTILE_RELEASE in text and HOSTILE_QUERY in text  # shown as text, not executed
    assert "gold_in_context · lost (62)" in text and lost_rows == 63  # header row + 62 movers
    assert "Family-wise false-alarm probability" in text
    assert tops[0] < tops[1] < tops[2] and mode_rows == 1 + 6  # header + 5 modes + abstained
    assert "Failure modes" in text and "retrieval_gap" in text and "rank_inversion" in text
    assert "under_use" in text and "fabrication" in text
    # and in words, for a release review that does not know the audit's names
    for words in ("retrieval gap: no relevant passage", "rank inversion:", "under-use:", "fabrication: claims"):
        assert words in text, words
    assert "Surface × grounding" in text and "Surface up, grounding down" in text
    n_cell = int(heading.rsplit("(", 1)[1].rstrip(")"))
    assert target.startswith("#transition-") and shown == n_cell + 1
    assert (tmp_path / "report.png").stat().st_size > 10_000


class _Tables(HTMLParser):
    """Every table of a page as rows of cell texts, each table with the class it was given."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[tuple[str, list[list[str]]]] = []
        self._cell: list[str] | None = None
        self.warnings: list[str] = []
        self._in_warnings = False
        self._item: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.tables.append((dict(attrs).get("class") or "", []))
        elif tag == "tr" and self.tables:
            self.tables[-1][1].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "ul" and dict(attrs).get("id") == "warnings":
            self._in_warnings = True
        elif tag == "li" and self._in_warnings:
            self._item = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][1][-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "li" and self._item is not None:
            self.warnings.append("".join(self._item).strip())
            self._item = None
        elif tag == "ul":
            self._in_warnings = False

    def handle_data(self, data: str) -> None:
        for sink in (self._cell, self._item):
            if sink is not None:
                sink.append(data)


def _tables(html: str) -> _Tables:
    parser = _Tables()
    parser.feed(html)
    return parser


TRACE_TABLES = ("movers", "transitions", "surface-movers")


def test_trace_lists_name_each_trace_once(comparison) -> None:
    # with a server every trace id is a link to its page: no column repeats the candidate's
    linked = _tables(render_report(comparison, server_url="http://collector.local/"))
    lists = [rows for cls, rows in linked.tables if cls in TRACE_TABLES]
    assert len(lists) > 5
    for rows in lists:
        assert rows[0][-2:] == ["baseline trace", "candidate trace"], rows[0]
        for row in rows[1:]:
            assert len(row) == len(rows[0]) and len(set(row[-2:])) == 2, row
    # without one, a last column gives the command that shows the candidate's trace
    plain = _tables(render_report(comparison))
    for rows in (rows for cls, rows in plain.tables if cls in TRACE_TABLES):
        assert rows[0][-3:] == ["baseline trace", "candidate trace", "show"], rows[0]
        for row in rows[1:]:
            assert row[-1] == f"ragtrace traces show {row[-2]}", row


def test_the_bootstrap_notes_are_in_the_report(comparison) -> None:
    # what the terminal only counts, the report lists: every note of the JSON, in the HTML
    notes = comparison.to_json()["warnings"]
    assert any("every bootstrap replicate is equal" in n for n in notes)
    assert _tables(render_report(comparison)).warnings == notes
