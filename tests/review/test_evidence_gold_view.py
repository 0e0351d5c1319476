"""What the item and trace pages show of evidence-span gold: the chunk that holds a span is a gold
candidate with the span beside it, and a span no candidate holds is named (what retrieval missed)."""

from __future__ import annotations

from datetime import UTC, datetime

from ragtrace_review.view import candidates, trace_view
from ragtrace_review.web import templates
from ragtrace_store import DocumentRef, GoldEvidence, TraceRecord


def _inversion() -> TraceRecord:
    pool = (DocumentRef("c0", 0, 0.9, content="zero"), DocumentRef("c1", 1, 0.8, content="one"),
            DocumentRef("c2", 2, 0.7, content="two"))
    return TraceRecord(
        trace_id="t1", query_id="q1", tenant="default", service="svc", release="r1", environment="test",
        route="/ask", start_time=datetime(2026, 12, 4, tzinfo=UTC), query="which?", answer="two",
        retrieved=pool, reranked=(pool[2], pool[0], pool[1]), context=(pool[2],),
        gold_evidence=(GoldEvidence("c1", "d1", 110, 150), GoldEvidence("", "d3", 0, 10)))


def test_the_chunk_that_holds_the_evidence_is_a_gold_candidate_with_its_span() -> None:
    got = {c.doc_id: c for c in candidates(_inversion())}
    assert got["c1"].gold and got["c1"].evidence == ("d1[110:150]",) and not got["c1"].in_context
    assert not got["c0"].gold and not got["c2"].gold and got["c2"].evidence == ()
    view = trace_view(_inversion(), None)
    assert view.evidence_not_found == ("d3[0:10]",)


def test_the_partial_marks_the_gold_candidate_and_names_the_missed_evidence() -> None:
    html = templates().get_template("_trace.html").render(view=trace_view(_inversion(), None), editable=True)
    row = html[html.index("<code>c1</code>"):]
    row = row[:row.index("</tr>")]
    assert '<td class="gold-mark">★ <span class="hint evidence">d1[110:150]</span></td>' in row
    assert 'name="relevant" value="c1" aria-label="relevant" checked' in row  # the reviewer starts from it
    assert "Gold evidence no candidate holds:" in html and "<code>d3[0:10]</code>" in html
