"""The shipped Prometheus and Alertmanager configuration (deploy/prometheus/) as the real tools read it:
`promtool test rules` runs the rules' unit tests (ragtrace-rules.test.yml: each alert fires when it
should, after its `for:`, with its labels and annotations, and stays quiet on small samples, on the
clean release, on drift against the previous window only), `promtool check rules/config` and
`amtool check-config` accept the files."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from .tools import PROMETHEUS_DIR, tool

RULES = PROMETHEUS_DIR / "ragtrace-rules.yml"


def _run(*cmd: str, cwd: Path = PROMETHEUS_DIR) -> str:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120, check=False)
    out = done.stdout + done.stderr
    assert done.returncode == 0, f"{' '.join(cmd)} exited {done.returncode}:\n{out}"
    return out


def test_rule_unit_tests_pass() -> None:
    out = _run(tool("promtool"), "test", "rules", "ragtrace-rules.test.yml")
    assert "SUCCESS" in out and "FAILED" not in out, out


def test_every_alert_has_a_unit_test_and_a_runbook_section() -> None:
    alerts = re.findall(r"^\s*- alert: (\w+)", RULES.read_text(), flags=re.MULTILINE)
    tested = set(re.findall(r"alertname: (\w+)", (PROMETHEUS_DIR / "ragtrace-rules.test.yml").read_text()))
    assert alerts and set(alerts) == tested, (alerts, tested)
    runbook = (PROMETHEUS_DIR.parents[1] / "docs" / "production-loop.md").read_text()
    headings = {m.lower() for m in re.findall(r"^#+ .*?`?(\w+)`?\s*$", runbook, flags=re.MULTILINE)}
    assert {a.lower() for a in alerts} <= headings, "every alert's runbook anchor is a heading of the doc"


def test_rules_check() -> None:
    out = _run(tool("promtool"), "check", "rules", str(RULES))
    assert "SUCCESS" in out, out


def test_scrape_config_checks_once_its_token_file_exists(tmp_path: Path) -> None:
    config = (PROMETHEUS_DIR / "prometheus.yml").read_text()
    assert "credentials_file: /etc/prometheus/ragtrace.token" in config
    token = tmp_path / "ragtrace.token"
    token.write_text("a-tenant-token\n")
    (tmp_path / "prometheus.yml").write_text(config.replace("/etc/prometheus/ragtrace.token", str(token)))
    (tmp_path / "ragtrace-rules.yml").write_text(RULES.read_text())
    out = _run(tool("promtool"), "check", "config", "prometheus.yml", cwd=tmp_path)
    assert "SUCCESS: 1 rule files found" in out and "is valid prometheus config" in out, out


def test_alertmanager_config_checks() -> None:
    out = _run(tool("amtool"), "check-config", "alertmanager.yml")
    assert "SUCCESS" in out and "2 receivers" in out, out
