"""Arguments that cannot mean what the user wanted: an inverted time window, an -m that names no
measure, a directory where a label file or release is expected. Each is a usage error saying
what to change, never an empty result that looks like an answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ragtrace_cli.commands.compare import compare_main
from ragtrace_cli.commands.metrics import metrics_main
from ragtrace_cli.commands.traces import traces_main
from ragtrace_evaluator.audit.run import AuditError, run_audit


def test_traces_refuses_a_since_after_until(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        traces_main(["--store", str(tmp_path), "--since", "2026-11-02", "--until", "2026-11-01"])
    assert exc.value.code == 2
    assert "--since 2026-11-02T00:00:00+00:00 is not before --until 2026-11-01T00:00:00+00:00" in \
        capsys.readouterr().err


@pytest.mark.parametrize("timeout", ["0", "-1", "nan"])
def test_audit_refuses_a_timeout_that_is_not_positive(timeout: str, capsys: pytest.CaptureFixture[str]) -> None:
    from ragtrace_cli.commands.audit import audit_main

    # no server listens on port 9: the timeout is refused before any request
    with pytest.raises(SystemExit) as exc:
        audit_main(["--server", "http://127.0.0.1:9", "--timeout", timeout])
    assert exc.value.code == 2 and "--timeout must be > 0 seconds" in capsys.readouterr().err


def test_traces_show_refuses_an_empty_trace_id(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        traces_main(["show", " ", "--store", str(tmp_path)])
    assert exc.value.code == 2 and "give the trace id to show" in capsys.readouterr().err


def test_audit_refuses_a_since_after_until(chdb_store: Any) -> None:
    # ages: 1d ago is after 2d ago, the mistake of reading an age as a point ahead
    with pytest.raises(AuditError, match=r"--since .* is not before --until .*swap them"):
        run_audit(chdb_store, tenant="t-inverted", since="1d", until="2d")


def test_audit_with_a_model_that_cannot_be_loaded_is_an_audit_error(chdb_store: Any) -> None:
    with pytest.raises(AuditError, match=r"cannot load NLI model '/nonexistent/model'.*Pass a local directory"):
        run_audit(chdb_store, tenant="t-no-model", labeller="nli:/nonexistent/model")


@pytest.mark.parametrize("measures", [",", "", " , "])
def test_metrics_refuses_a_measure_list_that_names_none(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        measures: str) -> None:
    qrels, run = tmp_path / "qrels.txt", tmp_path / "run.txt"
    qrels.write_text("q1 0 d1 1\n", encoding="utf-8")
    run.write_text("q1 Q0 d1 1 0.9 tag\n", encoding="utf-8")
    assert metrics_main(["--qrels", str(qrels), "--run", str(run), "-m", measures]) == 2
    captured = capsys.readouterr()
    assert f"-m {measures!r} names no measure" in captured.err and captured.out == ""


@pytest.mark.parametrize("side", ["--baseline", "--candidate"])
def test_compare_refuses_a_directory_for_a_side(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                side: str) -> None:
    labels = tmp_path / "labels.jsonl"
    labels.write_text("", encoding="utf-8")
    folder = tmp_path / "audit-out"
    folder.mkdir()
    other = "--candidate" if side == "--baseline" else "--baseline"
    assert compare_main([side, str(folder), other, str(labels)]) == 2
    err = capsys.readouterr().err
    assert f"{folder} is a directory; give a per-trace JSON Lines file" in err and "no store" not in err


def test_compare_names_a_missing_candidate_file_before_reading_the_baseline_release(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the baseline is a release name, so it would need a store; the candidate's typo is what to fix
    missing = tmp_path / "candidat.jsonl"
    code = compare_main(["--baseline", "v1", "--candidate", str(missing), "--store", str(tmp_path / "no-store")])
    assert code == 2
    err = capsys.readouterr().err
    assert f"{missing}: no such file" in err and "no-store" not in err


@pytest.mark.parametrize("tenant", ["", " ", " acme"])
@pytest.mark.parametrize("command", ["traces", "labels", "audit", "compare", "review", "reviewers"])
def test_a_blank_tenant_is_refused_by_every_command(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    command: str, tenant: str) -> None:
    from ragtrace_cli.commands.audit import audit_main, labels_main
    from ragtrace_cli.commands.review import review_main, reviewers_main

    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 d1 1\n", encoding="utf-8")
    store = ["--store", str(tmp_path / "no-store")]
    argv = {"traces": (traces_main, store), "labels": (labels_main, ["import", str(qrels), *store]),
            "audit": (audit_main, store), "compare": (compare_main, ["--baseline", "a", "--candidate", "b", *store]),
            "review": (review_main, ["status", *store]), "reviewers": (reviewers_main, ["add", "bob", *store])}
    main, args = argv[command]
    # a blank tenant would write rows (gold, a reviewer) that no token reads, or read none
    if command == "compare":  # compare returns argparse's exit status instead of raising it
        assert main([*args, "--tenant", tenant]) == 2
    else:
        with pytest.raises(SystemExit) as exc:
            main([*args, "--tenant", tenant])
        assert exc.value.code == 2
    assert f"--tenant: {tenant!r}: give a tenant name without surrounding spaces" in capsys.readouterr().err


def test_an_age_with_a_leading_minus_is_a_value_not_an_option() -> None:
    from ragtrace_cli.commands.audit import _audit_parser
    from ragtrace_cli.commands.common import joined_ages

    argv = ["--since", "-1h", "--until", "-90s", "--release", "-v1", "--sample", "5"]
    assert joined_ages(argv) == ["--since=-1h", "--until=-90s", "--release", "-v1", "--sample", "5"]
    args = _audit_parser().parse_args(joined_ages(["--since", "-1h", "--until", "-2.5m"]))
    assert (args.since, args.until) == ("-1h", "-2.5m")
    with pytest.raises(SystemExit):  # without the join argparse refuses the documented form
        _audit_parser().parse_args(["--since", "-1h"])


@pytest.mark.parametrize("server", [["--server", "http://127.0.0.1:9"], ["--server=http://127.0.0.1:9"]])
def test_compare_says_it_has_no_server_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            server: list[str]) -> None:
    # `--server URL` (how traces, audit and review go through `ragtrace serve`) was taken as an
    # abbreviation of --server-url, and compare then reported that the default store does not exist
    assert compare_main(["--baseline", "v1", "--candidate", "v2", "--store", str(tmp_path), *server]) == 2
    err = capsys.readouterr().err
    assert "compare has no --server mode" in err and "--per-trace" in err and "there is no store" not in err


def test_compare_takes_no_abbreviated_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labels = tmp_path / "labels.jsonl"
    labels.write_text("", encoding="utf-8")
    assert compare_main(["--baseline", str(labels), "--candidate", str(labels), "--res", "100"]) == 2
    assert "unrecognized arguments: --res 100" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["traces"], ["traces", "show", "0af7651916cd43dd8448eb211c80319c"], ["audit"],
                                     ["review", "status", "--token", "t"], ["reviewers", "list"]])
def test_a_tenant_given_with_server_is_refused_not_ignored(command: list[str],
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    # through a server the token selects the tenant; --tenant was silently dropped, so `traces --server
    # URL --tenant teamB` listed the token's tenant (and its next-page command repeated --tenant teamB),
    # and `review status` / `reviewers list` showed the token's queues and reviewers
    from ragtrace_cli.main import main

    # no server listens on port 9: the flags are refused before any request
    with pytest.raises(SystemExit) as exc:
        main([*command, "--server", "http://127.0.0.1:9", "--tenant", "teamB"])
    assert exc.value.code == 2
    assert "--tenant teamB applies to direct store access (--store); through --server the token" in \
        capsys.readouterr().err
