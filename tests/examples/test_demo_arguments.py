"""`ragtrace demo` arguments that cannot work are refused before the demo writes anywhere: a file
where a folder goes and a port out of range are usage errors (exit 2, no traceback), and a port that
another server already holds is refused rather than used. Before, the other server answered the demo's
readiness probe while the demo's own `ragtrace serve` failed to bind, and the demo sent its traffic,
audit and labels to that server's store."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import httpx
import pytest

from ragtrace_examples.demo import demo_main


@pytest.mark.parametrize("flag", ["--out", "--store"])
def test_a_file_given_for_a_folder_is_a_usage_error(tmp_path: Path, flag: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a folder", encoding="utf-8")
    argv = [flag, str(a_file)] if flag == "--out" else ["--out", str(tmp_path / "out"), flag, str(a_file)]
    with pytest.raises(SystemExit) as exc:
        demo_main([*argv, "--quiet"])
    assert exc.value.code == 2
    assert f"{flag} {a_file} is a file; give a directory" in capsys.readouterr().err


def test_a_port_out_of_range_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        demo_main(["--out", str(tmp_path / "out"), "--port", "70000", "--quiet"])
    assert exc.value.code == 2 and "--port must be in 1..65535" in capsys.readouterr().err


def test_quiet_and_verbose_together_are_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        demo_main(["--out", str(tmp_path / "out"), "--quiet", "--verbose"])
    assert exc.value.code == 2 and "not allowed with argument" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_port_held_by_another_server_is_refused(example_collector: str, tmp_path: Path) -> None:
    port = urlparse(example_collector).port
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-m", "ragtrace_cli.main", "demo", "--out", str(tmp_path / "out"),
                           "--docs", "10", "--port", str(port), "--quiet"], capture_output=True, text=True,
                          timeout=600, env=env)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert f"port {port} is already in use" in done.stderr
    # the other server's store got nothing from the demo
    listed = httpx.get(f"{example_collector}/api/traces", params={"all": "true"}, timeout=60)
    assert listed.status_code == 200 and listed.content == b""
