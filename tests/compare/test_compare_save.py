"""`ragtrace compare --save`: the report kept in the store's `compare_reports`, which `/dashboard` shows."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from ragtrace_cli.commands.compare import compare_main
from ragtrace_store import open_store
from ragtrace_store.compare_reports import latest_compare_report

from .story import story_records


def _write(path: Path, records: list[dict[str, object]], release: str) -> str:
    path.write_text("".join(json.dumps({**r, "release": release, "trace_id": f"{release}-{r['query_id']}"}) + "\n"
                            for r in records), encoding="utf-8")
    return str(path)


def test_save_keeps_the_report_the_command_printed(chdb_http_server: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    tenant = f"save-{uuid.uuid4().hex[:8]}"
    base, cand = story_records()
    a, b = _write(tmp_path / "a.jsonl", base, "v1"), _write(tmp_path / "b.jsonl", cand, "v2")
    out = tmp_path / "r.json"
    open_store(chdb_http_server, migrate=True).close()  # `ragtrace store migrate`: compare never migrates
    code = compare_main(["--baseline", a, "--candidate", b, "--store", chdb_http_server, "--tenant", tenant,
                         "--save", "--json", str(out), "--resamples", "500"])
    assert code == 1  # the story trips the recall gate
    assert f"(tenant {tenant})" in capsys.readouterr().out
    printed = json.loads(out.read_text())
    with open_store(chdb_http_server, migrate=False) as store:
        saved = latest_compare_report(store, tenant=tenant)
        assert saved is not None and (saved.baseline, saved.candidate) == (a, b) and saved.tripped
        assert list(saved.gates) == printed["gates"] and saved.summary == printed["gates_summary"]
        full = store.query_rows("SELECT report FROM ragtrace.compare_reports WHERE tenant = {t:String}",
                                {"t": tenant})
        assert [json.loads(r[0]) for r in full] == [printed]
        assert latest_compare_report(store, tenant=tenant + "-other") is None
    # without a usable store, --save is a usage error and nothing is claimed saved
    missing = tmp_path / "no-store"
    assert compare_main(["--baseline", a, "--candidate", b, "--store", str(missing), "--save",
                         "--resamples", "300"]) == 2
    assert "--save: there is no store" in capsys.readouterr().err
