"""`--store` values a user mistypes: a read-only command never creates a store at them, and a URL
with another scheme than http(s) is refused instead of becoming a directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragtrace_cli.commands.store import store_main
from ragtrace_cli.commands.traces import traces_main
from ragtrace_store import StoreError, open_store


@pytest.mark.parametrize("action", [["status"], ["retention", "--days", "7"]])
def test_store_status_and_retention_do_not_create_a_missing_store(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], action: list[str]) -> None:
    typo = tmp_path / "sotre"
    assert store_main([*action, "--store", str(typo)]) == 2
    err = capsys.readouterr().err
    assert f"ragtrace store {action[0]}: there is no store at {typo}" in err and "store migrate" in err
    assert not typo.exists()


@pytest.mark.parametrize("url", ["clickhouse://host:9000/db", "ftp://host/db", "tcp://user:secret@host/db"])
def test_a_store_url_of_another_scheme_is_refused_not_made_a_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], url: str) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError, match=r"http\(s\)://user:password@host:8123/database"):
        open_store(url, migrate=False)
    assert store_main(["migrate", "--store", url]) == 2
    assert traces_main(["--store", url]) == 2
    err = capsys.readouterr().err
    assert "ragtrace store: --store" in err and "ragtrace traces: --store" in err and "secret" not in err
    assert list(tmp_path.iterdir()) == []
