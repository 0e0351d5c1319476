"""The layout's rules, checked: layers never import upward, the conventions import no
OpenTelemetry, and every package's folder is its import path."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _lint_imports() -> str:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert exe, "import-linter is a dev dependency: pip install -e '.[dev]'"
    return exe


def test_the_layer_contracts_hold() -> None:
    result = subprocess.run([_lint_imports()], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_an_upward_import_breaks_the_contract(tmp_path: Path) -> None:
    """The contract is not vacuous: a copy of the tree where ingest imports the evaluator fails it."""
    copy = tmp_path / "tree"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".git", ".venv", "build", "__pycache__", "*.so",
                                                              ".*_cache", "tests", "benchmarks", "docs"))
    target = copy / "collector" / "src" / "ragtrace_collector" / "memory.py"
    target.write_text(target.read_text() + "\nimport ragtrace_evaluator.manifest  # noqa: E402,F401\n")
    roots = [str(copy / r) for r in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["where"]]
    env = {"PYTHONPATH": ":".join(roots), "PATH": str(Path(sys.executable).parent)}
    result = subprocess.run([_lint_imports()], cwd=copy, capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode != 0
    assert "ragtrace_collector.memory -> ragtrace_evaluator.manifest" in result.stdout


def test_the_conventions_import_no_opentelemetry() -> None:
    code = ("import sys; import ragtrace.semconv as sc; "
            "assert sc.SPAN_KIND, 'no conventions'; "
            "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"


def test_the_sdk_loads_opentelemetry_when_used() -> None:
    code = ("import sys, ragtrace; ragtrace.configure; "
            "print(any(m.startswith('opentelemetry') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "True"


@pytest.mark.parametrize("where", PYPROJECT["tool"]["setuptools"]["packages"]["find"]["where"])
def test_folders_are_import_paths(where: str) -> None:
    """Every module under a source root imports from the file its dotted path names."""
    root = ROOT / where
    packages = [p for p in root.iterdir() if (p / "__init__.py").exists() and p.name.startswith("ragtrace")]
    assert packages, f"no package under {where}"
    for package in packages:
        for path in package.rglob("*.py"):
            rel = path.relative_to(root).with_suffix("")
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            name = ".".join(parts)
            spec = importlib.util.find_spec(name)
            assert spec is not None and spec.origin is not None, name
            assert Path(spec.origin).resolve() == path.resolve(), (name, spec.origin)


def test_mypy_and_ruff_know_the_same_source_roots() -> None:
    where = [w for w in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["where"] if w != "."]
    assert PYPROJECT["tool"]["mypy"]["mypy_path"] == where
    assert PYPROJECT["tool"]["ruff"]["src"] == [".", *where]
