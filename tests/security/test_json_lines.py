"""JSON Lines are split on "\\n" only.

`str.splitlines()` also splits on U+2028, U+2029, U+0085 and the \\x0b \\x0c \\x1c-\\x1e controls, which
JSON strings may hold unescaped (orjson and ``json.dumps(ensure_ascii=False)`` write U+2028 as is).
One trace holding such a character made `ragtrace traces --server` exit 1 for the whole tenant, and
`ragtrace compare` refused the audit's own ``--per-trace`` file. Both through a real `ragtrace serve`
app on loopback, with the separators in queries, answers, passages and query ids.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from ragtrace_cli.commands.audit import audit_main
from ragtrace_cli.commands.compare import compare_main
from ragtrace_cli.commands.traces import traces_main
from ragtrace_evaluator.compare.records import load_jsonl
from ragtrace_store import LabelRecord, read_label_lines
from tests import otlp_builders as T
from tests.collector._server import running

#: every character str.splitlines() breaks on that JSON may carry raw ("\n" and "\r" are always escaped)
SEPARATORS = "\u2028\u2029\u0085\x0b\x0c\x1c\x1d\x1e"


def _trace(i: int, release: str) -> T.TraceSpec:
    docs = [T.Doc(f"d{j}", f"passage {j}{SEPARATORS}of trace {i}", 1.0 - j / 10) for j in range(3)]
    return T.TraceSpec(query=f"question {i}{SEPARATORS}with separators", answer=f"answer{SEPARATORS}{i}",
                       query_id=f"q{SEPARATORS}{i}", retrieved=docs, reranked=docs, top_k=2, gold=["d0"])


def _post(url: str, specs: list[T.TraceSpec], release: str, service: str, token: str) -> None:
    body = T.request([s for spec in specs for s in spec.spans()], service=service, release=release)
    r = httpx.post(f"{url}/v1/traces", content=body.SerializeToString(),
                   headers={"content-type": "application/x-protobuf", "authorization": f"Bearer {token}"})
    assert r.status_code == 200, r.text


def test_traces_through_the_server_keep_every_trace(chdb_store: Any, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    tenant, service = f"jl-{uuid.uuid4().hex[:8]}", f"svc-{uuid.uuid4().hex[:6]}"
    specs = [_trace(i, "r1") for i in range(3)]
    with running(chdb_store, str(tmp_path / "spool"), tokens={"tok": tenant}) as (url, app):
        _post(url, specs, "r1", service, "tok")
        assert app.state.writer.flush(30)
        code = traces_main(["--server", url, "--token", "tok", "--service", service, "--json"])
        out = capsys.readouterr()
        assert code == 0, out.err
        # also the table, which reads the same NDJSON
        assert traces_main(["--server", url, "--token", "tok", "--service", service]) == 0, capsys.readouterr().err
        capsys.readouterr()
    lines = [line for line in out.out.split("\n") if line.strip()]
    got = {obj["trace_id"]: obj for obj in map(json.loads, lines)}
    assert set(got) == {s.trace_id for s in specs}
    for spec in specs:
        assert got[spec.trace_id]["query"] == spec.query and got[spec.trace_id]["query_id"] == spec.query_id


def test_compare_reads_the_audits_own_per_trace_files(chdb_store: Any, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    tenant, service = f"jl-{uuid.uuid4().hex[:8]}", f"svc-{uuid.uuid4().hex[:6]}"
    files = {}
    with running(chdb_store, str(tmp_path / "spool"), tokens={"tok": tenant}) as (url, app):
        for release in ("base", "cand"):
            _post(url, [_trace(i, release) for i in range(4)], release, service, "tok")
        assert app.state.writer.flush(30)
        for release in ("base", "cand"):
            files[release] = tmp_path / f"labels-{release}.jsonl"
            code = audit_main(["--server", url, "--token", "tok", "--service", service, "--release", release,
                               "--stages", "retrieval", "--relevance-labeller", "none", "--quiet",
                               "--per-trace", str(files[release])])
            assert code == 0, capsys.readouterr().err
    raw = files["base"].read_text(encoding="utf-8")
    assert "\u2028" in raw, "the per-trace file should hold the separator as written (not escaped)"
    assert len(read_label_lines(files["base"])) == 4
    assert len(load_jsonl(files["base"]).labels) == 4
    capsys.readouterr()
    code = compare_main(["--baseline", str(files["base"]), "--candidate", str(files["cand"]),
                         "--json", "-", "--resamples", "200"])
    out = capsys.readouterr()
    assert code in (0, 1), out.err  # 2 would be "cannot read the input"
    assert json.loads(out.out)["pairing"]["n_pairs"] == 4  # every query id, separators and all


def test_a_record_with_separators_round_trips_through_the_file(tmp_path: Path) -> None:
    # the writer and both readers agree on what a line is
    from ragtrace_store import write_label_lines

    rec = {"trace_id": "t1", "query_id": f"q{SEPARATORS}", "release": "r", "service": "s", "manifest_id": "m",
           "failure_mode": "retrieval_gap", "gold_in_pool": False, "gold_in_context": False,
           "retrieval": {"gold_in_pool": False, "gold_in_context": False, "n_gold": 1, "gold_source": "span"},
           "ranking": {"ok": None, "best_gold_rank": None, "best_distractor_rank": None}, "generation": None,
           "metrics": {}, "pass": False, "score": 0.0, "confidence": 1.0}
    path = tmp_path / "one.jsonl"
    write_label_lines(path, [LabelRecord.from_json(rec)])
    assert path.read_text(encoding="utf-8").count("\n") == 1
    (back,) = read_label_lines(path)
    assert back.query_id == rec["query_id"]
    assert [lab.query_id for lab in load_jsonl(path).labels] == [rec["query_id"]]
    assert orjson.loads(path.read_bytes())["query_id"] == rec["query_id"]
