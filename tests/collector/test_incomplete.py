"""Incomplete traces over real OTLP/HTTP to a real serve app: a span that lost attributes, document
indices with holes, a reranker without output, a pipeline whose stages never arrived. Each is marked
with its reason, the sender hears about dropped attributes, /metrics counts them, and `ragtrace
traces` shows it; a complete trace beside them stays complete."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from ragtrace import semconv as sc
from ragtrace_cli.commands.traces import traces_main
from tests import otlp_builders as T

from ._server import running

PB = {"content-type": "application/x-protobuf", "authorization": "Bearer tok"}


def _codes(rec: Any) -> set[str]:
    return {r.split(":", 1)[0] for r in rec.incomplete_reasons}


def test_incomplete_traces_are_marked_counted_and_shown(chdb_store: Any, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    tenant = f"inc-{uuid.uuid4().hex[:8]}"
    docs = T.corpus(30, size=80)
    complete = T.standard_trace(docs, 0)
    lost = T.standard_trace(docs, 1)
    lost_spans = lost.spans()
    lost_spans[1].dropped = 40  # the retriever span: as a stock SDK reports its attribute limit
    holes = T.standard_trace(docs, 2, openinference_only=True, with_reranker=False)
    holes_spans = holes.spans()
    for i in (2, 5):  # two documents' attributes vanished without a count: indices 0, 1, 3, 4, 6, ...
        for field in (sc.DOCUMENT_ID, sc.DOCUMENT_SCORE, sc.DOCUMENT_CONTENT, sc.DOCUMENT_CONTENT_HASH):
            holes_spans[1].attrs.pop(sc.document_attribute(sc.RETRIEVAL_DOCUMENTS, i, field), None)
    no_output = T.standard_trace(docs, 3, openinference_only=True)
    no_output_spans = no_output.spans()
    no_output_spans[2].attrs = {k: v for k, v in no_output_spans[2].attrs.items()
                                if not k.startswith(sc.RERANKER_OUTPUT_DOCUMENTS)}
    alone = T.SpanSpec(os.urandom(16).hex(), os.urandom(8).hex(), "pipeline",
                       {sc.SPAN_KIND: "CHAIN", sc.SDK_VERSION: "0.1.0", sc.INPUT_VALUE: "q", sc.OUTPUT_VALUE: "a"})

    with running(chdb_store, str(tmp_path / "spool"), tokens={"tok": tenant}) as (url, app):
        ok = httpx.post(f"{url}/v1/traces", headers=PB, content=T.request(
            complete.spans() + holes_spans + no_output_spans + [alone]).SerializeToString())
        warned = httpx.post(f"{url}/v1/traces", headers=PB, content=T.request(lost_spans).SerializeToString())
        assert ok.status_code == 200 and warned.status_code == 200
        assert app.state.writer.flush(30)
        metrics = httpx.get(f"{url}/metrics", headers={"authorization": "Bearer tok"}).text
        # the sender is told, in partial_success (rejected 0: a warning), what to raise
        resp = ExportTraceServiceResponse.FromString(warned.content)
        assert resp.partial_success.rejected_spans == 0
        assert "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT" in resp.partial_success.error_message
        assert not ExportTraceServiceResponse.FromString(ok.content).partial_success.error_message

        rc_list = traces_main(["--server", url, "--token", "tok", "--limit", "20"])
        listed = capsys.readouterr().out
        rc_show = traces_main(["show", lost.trace_id, "--server", url, "--token", "tok"])
        shown = capsys.readouterr().out
    assert "ragtrace_spans_dropped_attributes_total 1" in metrics

    got = {r.trace_id: r for r in chdb_store.read_traces(tenant=tenant)}
    assert got[complete.trace_id].complete and got[complete.trace_id].incomplete_reasons == ()
    assert _codes(got[lost.trace_id]) == {"dropped_attributes"}
    assert "lost 40 attributes" in got[lost.trace_id].incomplete_reasons[0]
    assert _codes(got[holes.trace_id]) == {"document_holes"}
    assert "(2 missing)" in got[holes.trace_id].incomplete_reasons[0]
    assert _codes(got[no_output.trace_id]) == {"missing_stage"}
    assert "no output documents" in got[no_output.trace_id].incomplete_reasons[0]
    assert _codes(got[alone.trace_id]) == {"missing_stage"}
    assert not any(got[t].complete for t in (lost.trace_id, holes.trace_id, no_output.trace_id, alone.trace_id))

    assert rc_list == 0 and rc_show == 0
    rows = {line.split()[0]: line for line in listed.splitlines() if line[:32] in got}
    assert "incomplete" in rows[lost.trace_id] and "incomplete" not in rows[complete.trace_id]
    assert "INCOMPLETE" in shown and "dropped_attributes: span 'retrieve' (RETRIEVER) lost 40" in shown
