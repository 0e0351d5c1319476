"""`ragtrace serve` arguments that cannot work are refused before the store is opened or the app
started (no traceback from the app's startup)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragtrace_cli.commands.serve import serve_main


def test_a_spool_dir_that_is_a_file_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spool = tmp_path / "spool"
    spool.write_text("not a directory", encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        serve_main(["--store", str(tmp_path / "store"), "--port", "0", "--spool-dir", str(spool)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"--spool-dir {spool} is a file; give a directory" in err and "Traceback" not in err
    assert not (tmp_path / "store").exists()  # refused before anything was created


@pytest.mark.parametrize(("env", "said"), [
    ({"RAGTRACE_PORT": "43l8"}, "RAGTRACE_PORT='43l8': not a whole number"),
    ({"RAGTRACE_BATCH_INTERVAL": "soon"}, "RAGTRACE_BATCH_INTERVAL='soon'"),
    ({"RAGTRACE_SPOOL_FSYNC": "maybe"}, "RAGTRACE_SPOOL_FSYNC='maybe': invalid boolean"),
])
def test_an_environment_value_that_cannot_be_read_stops_the_start(env: dict[str, str], said: str, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    # it used to be logged and replaced by the default: a mistyped port served on 4318 unnoticed
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    with pytest.raises(SystemExit) as exc:
        serve_main(["--store", str(tmp_path / "store")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert said in err and "fix or unset it" in err and "Traceback" not in err
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize(("names", "said"), [
    ("offline,nli:/models/deberta,ofline", "unknown labeller 'ofline'"),
    ("py:mypkg", "use py:MODULE:FUNCTION"),
])
def test_an_audit_labeller_no_audit_could_build_stops_the_start(names: str, said: str, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # checked when POST /api/audit asked for it before, so a typo served until someone did
    with pytest.raises(SystemExit) as exc:
        serve_main(["--store", str(tmp_path / "store"), "--port", "0", "--audit-labellers", names])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert said in err and "--audit-labellers" in err and "Traceback" not in err
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize("host", ["999.1.1.1", "no-such-host.invalid"])
def test_a_host_that_cannot_be_listened_on_stops_the_start(host: str, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    # ".invalid" never resolves (RFC 2606), so this needs no network
    with pytest.raises(SystemExit) as exc:
        serve_main(["--store", str(tmp_path / "store"), "--port", "0", "--host", host])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"--host / $RAGTRACE_HOST {host!r}: not an address or a name" in err and "Traceback" not in err
    assert not (tmp_path / "store").exists()  # refused before the store was created
