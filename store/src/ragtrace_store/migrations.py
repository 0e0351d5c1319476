"""Schema migrations: numbered SQL files shipped in ``ragtrace_store/migrations/<variant>/``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

from ragtrace_store.errors import StoreError


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    statements: tuple[str, ...]


def load_migrations(variant: str = "single") -> list[Migration]:
    """Migrations shipped in ``ragtrace_store/migrations/<variant>/NNNN_name.sql``, in version order."""
    if variant not in ("single", "cluster"):
        raise StoreError(f"unknown schema variant {variant!r}: use 'single' or 'cluster'")
    folder = resources.files("ragtrace_store").joinpath("migrations", variant)
    found = []
    for entry in folder.iterdir():
        m = re.match(r"^(\d{4})_(\w+)\.sql$", entry.name)
        if not m:
            continue
        text = entry.read_text(encoding="utf-8")
        statements = tuple(s.strip() for s in re.split(r"^;\s*$", text, flags=re.M) if _has_sql(s))
        found.append(Migration(int(m.group(1)), m.group(2), statements))
    return sorted(found, key=lambda mig: mig.version)


def _has_sql(chunk: str) -> bool:
    return any(line.strip() and not line.strip().startswith("--") for line in chunk.splitlines())
