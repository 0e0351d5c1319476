"""Debian's Prometheus and Alertmanager as child processes on loopback, configured from the shipped files
in deploy/prometheus/ with only what a test must change: the target and its token file, the ports, the
storage, the intervals (seconds instead of minutes) and the `for:` durations (the alert expressions,
labels and routes are the shipped ones)."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.otlp_builders import free_port, stop_child

from .tools import PROMETHEUS_DIR, tool


def shipped(name: str) -> Any:
    return yaml.safe_load((PROMETHEUS_DIR / name).read_text())


def rules_with_for(rules: Mapping[str, Any], durations: Mapping[str, str]) -> dict[str, Any]:
    """The shipped rules with each named alert's ``for:`` replaced (an alert left out keeps its own)."""
    out = {"groups": []}
    for group in rules["groups"]:
        kept = []
        for rule in group["rules"]:
            rule = dict(rule)
            if rule.get("alert") in durations:
                rule["for"] = durations[rule["alert"]]
            kept.append(rule)
        out["groups"].append({**group, "rules": kept})
    return out


def _wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/-/ready", timeout=2).status_code == 200:
                return
        time.sleep(0.1)  # another process: nothing to wait on but its answer
    raise RuntimeError(f"{what} not ready within {timeout:.0f}s:\n{log.read_text()[-3000:]}")


@contextlib.contextmanager
def _child(cmd: list[str], log: Path, what: str, url: str) -> Iterator[str]:
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_ready(url, proc, log, what)
        yield url
    finally:
        stop_child(proc, 30)


@contextlib.contextmanager
def alertmanager(folder: Path, *, webhook: str, group_wait: str = "1s") -> Iterator[str]:
    """The shipped alertmanager.yml with every receiver's webhook pointed at ``webhook`` plus
    ``/<receiver name>`` and a short ``group_wait``; yields its base URL."""
    config = shipped("alertmanager.yml")
    config["route"]["group_wait"] = group_wait
    for receiver in config["receivers"]:
        for hook in receiver.get("webhook_configs", []):
            hook["url"] = f"{webhook}/{receiver['name']}"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "alertmanager.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [tool("prometheus-alertmanager"), f"--config.file={path}", f"--storage.path={folder / 'data'}",
           f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=", "--log.level=warn"]
    with _child(cmd, folder / "alertmanager.log", "alertmanager", url) as got:
        yield got


@contextlib.contextmanager
def prometheus(folder: Path, *, target: str, token: str, alertmanager_url: str | None,
               durations: Mapping[str, str], interval: str = "1s") -> Iterator[str]:
    """The shipped prometheus.yml scraping ``target`` (host:port) with ``token`` in its credentials
    file, evaluating the shipped rules (``for:`` from ``durations``) every ``interval``; yields its base URL."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ragtrace.token").write_text(token)
    (folder / "ragtrace-rules.yml").write_text(
        yaml.safe_dump(rules_with_for(shipped("ragtrace-rules.yml"), durations), sort_keys=False))
    config = shipped("prometheus.yml")
    config["global"].update(scrape_interval=interval, evaluation_interval=interval)
    (job,) = config["scrape_configs"]
    job["authorization"]["credentials_file"] = str(folder / "ragtrace.token")
    job["static_configs"] = [{"targets": [target]}]
    if alertmanager_url is None:
        config.pop("alerting")
    else:
        config["alerting"]["alertmanagers"][0]["static_configs"] = [
            {"targets": [alertmanager_url.removeprefix("http://")]}]
    path = folder / "prometheus.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [tool("prometheus"), f"--config.file={path}", f"--storage.tsdb.path={folder / 'data'}",
           f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"]
    with _child(cmd, folder / "prometheus.log", "prometheus", url) as got:
        yield got


def api(url: str, path: str, **params: str) -> Any:
    """``data`` of a Prometheus HTTP API answer (``status`` must be ``success``)."""
    body = httpx.get(f"{url}{path}", params=params, timeout=10).json()
    assert body["status"] == "success", body
    return body["data"]


def alerts(url: str, name: str) -> list[dict[str, Any]]:
    """The alerts named ``name`` Prometheus holds now (pending or firing), from ``/api/v1/alerts``."""
    return [a for a in api(url, "/api/v1/alerts")["alerts"] if a["labels"].get("alertname") == name]


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, step: float = 0.25) -> Any:
    """Poll ``predicate`` until it returns something truthy (returned), or fail saying ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        got = predicate()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f}s")
        time.sleep(step)
