"""Debian's Prometheus tools (packages `prometheus` and `prometheus-alertmanager`, listed in
deploy/debian-packages.txt): a test that needs one and does not find it fails, saying how to install it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: the shipped configuration under test
PROMETHEUS_DIR = ROOT / "deploy" / "prometheus"
_PACKAGE = {"prometheus": "prometheus", "promtool": "prometheus", "amtool": "prometheus-alertmanager",
            "prometheus-alertmanager": "prometheus-alertmanager"}


def tool(name: str) -> str:
    """The path of ``name`` on $PATH, or the test fails with the command that installs it."""
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed (Debian package {_PACKAGE[name]}): run `make system-deps`, or "
                    f"`apt-get install -y {_PACKAGE[name]}` as root", pytrace=False)
    return found
