"""The project's shape: the console script, extras and dependency direction."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import requires

import pytest

from ragtrace_cli import main as cli

HEAVY = ("torch", "transformers", "fastapi", "clickhouse-connect", "chdb", "uvicorn")


def test_sdk_distribution_requires_no_heavy_packages() -> None:
    base = [r for r in requires("ragtrace") or [] if "extra ==" not in r]
    assert base, "the SDK must declare its OpenTelemetry dependencies"
    for req in base:
        name = req.split(";")[0].split("[")[0].split("=")[0].split(">")[0].split("<")[0].strip().lower()
        assert name not in HEAVY, f"`pip install ragtrace` would bring {name}"


def test_usage_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 0
    out = capsys.readouterr().out
    for name in ("serve", "traces", "audit", "metrics", "compare", "reviewers", "demo"):
        assert f"  {name}" in out


def test_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["frobnicate"]) == 2
    assert "unknown command 'frobnicate'" in capsys.readouterr().err


def test_missing_extra_names_the_install_command() -> None:
    # Simulate an SDK-only install by making fastapi unimportable in a fresh interpreter.
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'fastapi' or name.startswith('fastapi.'):\n"
        "            raise ModuleNotFoundError(f\"No module named '{name}'\", name=name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from ragtrace_cli import main as cli\n"
        "sys.exit(cli.main(['serve', '--help']))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "pip install 'ragtrace[collector]'" in proc.stderr
