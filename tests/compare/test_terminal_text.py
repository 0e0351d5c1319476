"""The terminal output of `ragtrace compare` prints query ids, release names and statistic names as
they are. Query ids and release names come from the traced service; rich would read `:fire:` in them
(and the `:ok:` of the statistic `mode:ok`) as an emoji code and print 🔥 or 🆗 instead, so an id
copied from the screen would match no trace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragtrace_cli.commands.compare import compare_main
from tests.review.rows import label_record


def _write(path: Path, modes: list[str]) -> Path:
    with path.open("w", encoding="utf-8") as f:
        for i, mode in enumerate(modes):
            f.write(json.dumps(label_record(f"t{i:02d}", mode, query_id=f"q:fire:{i}")) + "\n")
    return path


def test_ids_and_statistic_names_are_printed_verbatim(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 10 rank inversions become fabrications and the other 20 stay ok: the `mode:ok` rate does not
    # move, so the report notes that it has no interval
    base = _write(tmp_path / "rel:ok:1.jsonl", ["rank_inversion" if i % 3 == 0 else "ok" for i in range(30)])
    cand = _write(tmp_path / "rel:ok:2.jsonl", ["fabrication" if i % 3 == 0 else "ok" for i in range(30)])
    report = tmp_path / "report.json"
    compare_main(["--baseline", str(base), "--candidate", str(cand), "--resamples", "200", "--max-ids", "100",
                  "--json", str(report)])
    out = capsys.readouterr().out
    assert "🔥" not in out and "🆗" not in out
    assert "rank_inversion → fabrication: 10  q:fire:0" in out and "(rel:ok:1.jsonl)" in out
    # the bootstrap's notes on single statistics are counted on the terminal and listed in the report
    warnings = json.loads(report.read_text(encoding="utf-8"))["warnings"]
    assert any(w.startswith("mode:ok: every bootstrap replicate is equal") for w in warnings), warnings
    assert f"{len(warnings)} bootstrap notes on undefined values or intervals" in out
