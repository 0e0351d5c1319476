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
