"""Input files a user gets wrong (a binary file, a UTF-16 export, a directory) given to the CLI:
each command says which file and what to do, exits 2 (1 for review's errors), and never prints a
traceback. Every file is read before a store is opened or a server asked, so no store is needed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ragtrace_cli.commands.audit import labels_main
from ragtrace_cli.commands.compare import compare_main
from ragtrace_cli.commands.metrics import metrics_main
from ragtrace_cli.commands.review import review_main

BINARY = bytes(range(128, 256)) * 4
UTF16 = "Q-42 0 gold 1\n".encode("utf-16")  # with its byte-order mark, as Windows tools write it


def _bad(tmp_path: Path, kind: str, name: str) -> Path:
    path = tmp_path / name
    if kind == "directory":
        path.mkdir()
    else:
        path.write_bytes(BINARY if kind == "binary" else UTF16)
    return path


def _commands(tmp_path: Path) -> dict[str, Callable[[Path], list[str]]]:
    good_run = tmp_path / "run.txt"
    good_run.write_text("Q-42 Q0 gold 1 0.9 tag\n", encoding="utf-8")
    good_qrels = tmp_path / "qrels.txt"
    good_qrels.write_text("Q-42 0 gold 1\n", encoding="utf-8")
    good_labels = tmp_path / "good.jsonl"
    good_labels.write_text("", encoding="utf-8")
    return {
        "labels import": lambda f: ["import", str(f), "--store", str(tmp_path / "no-store")],
        "labels import --kind references": lambda f: ["import", str(f), "--kind", "references"],
        "labels import --kind spans": lambda f: ["import", str(f), "--kind", "spans"],
        "metrics --qrels": lambda f: ["--qrels", str(f), "--run", str(good_run)],
        "metrics --run": lambda f: ["--qrels", str(good_qrels), "--run", str(f)],
        "compare --baseline": lambda f: ["--baseline", str(f), "--candidate", str(good_labels)],
        "compare --gates": lambda f: ["--baseline", str(good_labels), "--candidate", str(good_labels),
                                      "--gates", str(f)],
        "review enqueue --labels": lambda f: ["enqueue", "--queue", "q", "--labels", str(f),
                                              "--server", "http://127.0.0.1:9", "--token", "t"],
    }


_MAIN = {"labels": labels_main, "metrics": metrics_main, "compare": compare_main, "review": review_main}


@pytest.mark.parametrize("command", ["labels import", "labels import --kind references", "labels import --kind spans",
                                     "metrics --qrels", "metrics --run", "compare --baseline", "compare --gates",
                                     "review enqueue --labels"])
@pytest.mark.parametrize("kind", ["binary", "utf16"])
def test_a_file_that_is_not_utf8_is_named_with_the_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       command: str, kind: str) -> None:
    bad = _bad(tmp_path, kind, "bad.jsonl" if "compare --baseline" in command else "bad.txt")
    argv = _commands(tmp_path)[command](bad)
    code = _MAIN[command.split()[0]](argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err and "UnicodeDecodeError" not in err
    assert code == (1 if command.startswith("review") else 2), err
    assert str(bad) in err and "UTF-8" in err
    if kind == "utf16":
        assert "UTF-16" in err
    if kind == "binary":  # bytes are not "qrels" (the hint used to say so, from a lossy read of them)
        assert "looks like" not in err


def test_labels_import_names_a_per_trace_label_file_for_what_it_is(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    labels = tmp_path / "labels.jsonl"  # the top of an `ragtrace audit --per-trace` line
    labels.write_text('{"trace_id": "c-gap", "query_id": "", "release": "r1", "failure_mode": "retrieval_gap", '
                      '"pass": false}\n', encoding="utf-8")
    assert labels_main(["import", str(labels), "--store", str(tmp_path / "no-store")]) == 2
    err = capsys.readouterr().err
    assert "this is a per-trace label record (`ragtrace audit --per-trace`), not gold" in err


@pytest.mark.parametrize("content", ["", "\n  \n\n"])
@pytest.mark.parametrize("kind", ["auto", "qrels", "spans", "references"])
def test_labels_import_of_a_file_with_nothing_in_it_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                               content: str, kind: str) -> None:
    # "imported 0 judgements" and exit 0 let a wrong or truncated file pass a pipeline unnoticed
    empty = tmp_path / "gold.txt"
    empty.write_text(content, encoding="utf-8")
    code = labels_main(["import", str(empty), "--kind", kind, "--store", str(tmp_path / "no-store")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"{empty} holds nothing to import" in err
    assert not (tmp_path / "no-store").exists()  # refused before a store was opened


@pytest.mark.parametrize("command", ["labels import", "metrics --qrels"])
def test_a_directory_given_as_the_input_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       command: str) -> None:
    bad = _bad(tmp_path, "directory", "adir")
    code = _MAIN[command.split()[0]](_commands(tmp_path)[command](bad))
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and f"{bad}" in err and "Is a directory" in err


@pytest.mark.parametrize(("flag", "target", "says"), [
    ("--json", "adir", "is a directory"),
    ("--per-trace", "adir", "is a directory"),
    ("--json", "missing/report.json", "the directory"),
])
def test_audit_refuses_an_output_path_it_cannot_write_before_auditing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, target: str, says: str) -> None:
    from ragtrace_cli.commands.audit import audit_main

    (tmp_path / "adir").mkdir()
    # the store does not exist either: the output path is refused first, before any work
    code = audit_main(["--store", str(tmp_path / "no-store"), flag, str(tmp_path / target), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"{flag} {tmp_path / target}: {says}" in err and "no store" not in err
