"""The compose topology refers to real commands, options and settings (it cannot be run here: the
development machine has no container engine)."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import yaml

from ragtrace_cli.commands import serve as serve_cli
from ragtrace_cli.commands import store as store_cli
from ragtrace_cli.main import COMMANDS
from ragtrace_collector import settings as settings_module

COMPOSE = Path(__file__).resolve().parents[2] / "deploy" / "compose" / "docker-compose.yml"


def _parses(argv: list[str]) -> None:
    """The collector CLI accepts these arguments (checked with --help so nothing runs)."""
    main = {"serve": serve_cli.serve_main, "store": store_cli.store_main}[argv[0]]
    out = io.StringIO()
    rest = argv[1:]
    with contextlib.redirect_stdout(out):
        try:
            # argparse exits 0 on --help and 2 on an unknown option
            main([*rest[:1], "--help"] if argv[0] == "store" else ["--help"])
        except SystemExit as exc:
            assert exc.code == 0
    for token in rest:
        if token.startswith("--"):
            assert token in out.getvalue(), f"{argv[0]} has no option {token}"


def test_compose_services_use_real_commands_and_settings() -> None:
    doc = yaml.safe_load(COMPOSE.read_text())
    services = doc["services"]
    assert {"keeper", "clickhouse-1", "clickhouse-2", "migrate", "collector-1", "collector-2"} <= set(services)
    known_env = {v for k, v in vars(settings_module).items() if k.startswith("ENV_")} | {
        "RAGTRACE_REVIEW_SECRET", "RAGTRACE_CLUSTER"}
    for name, svc in services.items():
        cmd = svc.get("command")
        if cmd and cmd[0] == "ragtrace":
            assert cmd[1] in COMMANDS, name
            _parses(cmd[1:])
        for var in svc.get("environment") or {}:
            if var.startswith("RAGTRACE_"):
                assert var in known_env, f"{name}: {var} is not a collector setting"
    assert services["migrate"]["command"][-2:] == ["--cluster", "ragtrace"]
    for i in (1, 2):
        macros = (COMPOSE.parent / "clickhouse" / f"macros-{i}.xml").read_text()
        assert f"<replica>clickhouse-{i}</replica>" in macros
    assert "<ragtrace>" in (COMPOSE.parent / "clickhouse" / "cluster.xml").read_text()


def test_the_image_copies_every_source_root() -> None:
    """The Dockerfile installs the project from its folders: each package's folder must be copied."""
    import tomllib

    root = COMPOSE.parents[2]
    where = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["where"]
    dockerfile = (COMPOSE.parent / "Dockerfile").read_text()
    for source_root in where:
        folder = source_root.split("/")[0] if source_root != "." else "ragtrace"
        assert f"COPY {folder} {folder}" in dockerfile, folder


def test_the_image_builds_the_compiled_walk() -> None:
    """The collector refuses to start without its compiled walk: the image builds it, with the Debian
    packages listed for it, and checks that the installed package imports it."""
    dockerfile = (COMPOSE.parent / "Dockerfile").read_text()
    assert "deploy/install-debian-packages native" in dockerfile
    assert "python collector/native/build.py \\" in dockerfile and "collector/native/build.py --check" in dockerfile
