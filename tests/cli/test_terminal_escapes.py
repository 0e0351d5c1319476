"""Trace content printed to a terminal is shown, never obeyed. Queries, answers, passages, document
ids, release names and query ids come from whatever service sends spans; an escape sequence in them
(clear the screen, retitle the window, colour the rest of the output) or a carriage return that
overwrites the line reaches the terminal raw unless the CLI writes it as its escape. Checked on
`ragtrace traces` / `traces show` through the serve app on loopback over a real chDB store, and on
the terminal report of `ragtrace compare` (rich passes ESC through)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragtrace_cli.commands.compare import compare_main
from ragtrace_cli.commands.traces import traces_main
from tests.collector._server import running
from tests.review.rows import FakeTrace, label_record, write_trace

TOKEN = "esc-tok"
HOSTILE = "\x1b[2J\x1b]0;owned\x07\r\x08\u202e"
RAW = ("\x1b", "\x07", "\r", "\x08", "\u202e")


def _assert_shown_not_obeyed(out: str) -> None:
    assert not [c for c in RAW if c in out], repr(out[:500])
    assert "\\x1b[2J\\x1b]0;owned\\x07\\x0d\\x08\\u202e" in out


@pytest.fixture(scope="module")
def served(chdb_store: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    tenant = f"esc-{uuid.uuid4().hex[:8]}"
    trace_id = uuid.uuid4().hex
    write_trace(chdb_store, tenant, FakeTrace(
        trace_id=trace_id, query=f"where{HOSTILE}?", answer=f"here{HOSTILE}", query_id=f"q{HOSTILE}",
        retrieved=[(f"d{HOSTILE}", 0.9)], reranked=[], context=[f"d{HOSTILE}"],
        texts={f"d{HOSTILE}": f"passage{HOSTILE} text"}), release=f"r{HOSTILE}")
    with running(chdb_store, str(tmp_path_factory.mktemp("spool")), tokens={TOKEN: tenant}) as (url, _app):
        yield url, trace_id


def test_traces_listing_escapes_control_characters(served: tuple[str, str],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    url, trace_id = served
    assert traces_main(["--server", url, "--token", TOKEN]) == 0
    out = capsys.readouterr().out
    assert trace_id in out
    assert not [c for c in RAW if c in out], repr(out)
    assert "where\\x1b[2J" in out


def test_traces_show_escapes_control_characters(served: tuple[str, str],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    url, trace_id = served
    assert traces_main(["show", trace_id, "--server", url, "--token", TOKEN]) == 0
    out = capsys.readouterr().out
    _assert_shown_not_obeyed(out)
    for field in ("query    where", "answer   here", "release r", "query id q", "  #1   d", "passage"):
        assert field + "\\x1b[2J" in out, field
    # --json is JSON: orjson writes every control character as a \\u escape already
    assert traces_main(["show", trace_id, "--server", url, "--token", TOKEN, "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["query"] == f"where{HOSTILE}?"


def test_compare_report_escapes_control_characters(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sides = {}
    for side, changed in (("b", "rank_inversion"), ("c", "fabrication")):
        path = tmp_path / f"{side}.jsonl"
        with path.open("w", encoding="utf-8") as f:
            for i in range(30):
                rec = label_record(f"t{i:02d}", changed if i % 3 == 0 else "ok", query_id=f"q{HOSTILE}{i}")
                rec["release"] = f"r{HOSTILE}"
                f.write(json.dumps(rec) + "\n")
        sides[side] = path
    compare_main(["--baseline", str(sides["b"]), "--candidate", str(sides["c"]), "--resamples", "200"])
    out = capsys.readouterr().out
    assert "baseline r\\x1b[2J" in out and "q\\x1b[2J" in out
    assert "\x1b" not in out and "\r" not in out and "\u202e" not in out
