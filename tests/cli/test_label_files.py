"""Label files given to the CLI are read through the labels contract: a bad line is named, not a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragtrace_cli.commands.review import review_main


def test_review_enqueue_names_the_bad_line_of_a_labels_file(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    labels = tmp_path / "labels.jsonl"
    labels.write_text(json.dumps({"trace_id": "a" * 32, "failure_mode": "not_a_mode"}) + "\n", encoding="utf-8")
    # The file is read before anything is sent, so no server needs to listen on the port.
    code = review_main(["enqueue", "--queue", "q", "--labels", str(labels), "--server", "http://127.0.0.1:9",
                        "--token", "t"])
    err = capsys.readouterr().err
    assert code == 1
    assert f"{labels}:1" in err
    assert "Traceback" not in err
