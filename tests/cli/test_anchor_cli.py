"""`ragtrace anchor set|show|clear`, on a store (a ClickHouse HTTP interface served by chDB in another
process) and through a running serving app over loopback (--server, the token's tenant); bad input is
refused with what to give instead."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from ragtrace_cli.commands.anchor import anchor_main
from ragtrace_store import open_store
from ragtrace_store.anchors import anchor_for
from tests.collector._server import running


def test_anchor_on_a_store(chdb_http_server: str, capsys: pytest.CaptureFixture[str]) -> None:
    with open_store(chdb_http_server, migrate=True):
        pass  # `ragtrace store migrate`'s part: the anchor command never changes the schema
    tenant = "anchor-" + os.urandom(4).hex()
    base = ["--store", chdb_http_server, "--tenant", tenant]
    assert anchor_main(["set", "--release", "v41", *base]) == 0
    assert "every service" in capsys.readouterr().out
    assert anchor_main(["set", "--service", "qa", "--from", "2026-05-01T00:00Z", "--to", "2026-05-08T02:00+02:00",
                        *base]) == 0
    capsys.readouterr()
    assert anchor_main(["show", "--json", *base]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [(a["service"], a["release"], a["from"], a["to"]) for a in shown] == [
        ("", "v41", None, None), ("qa", None, "2026-05-01T00:00:00+00:00", "2026-05-08T00:00:00+00:00")]
    assert anchor_main(["show", "--service", "search", *base]) == 0  # falls back to the tenant's
    assert "release v41" in capsys.readouterr().out
    assert anchor_main(["clear", "--service", "qa", *base]) == 0
    assert "cleared" in capsys.readouterr().out
    assert anchor_main(["clear", "--service", "qa", *base]) == 0
    assert "had no anchor" in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "message"), [
    (["set"], "one of the arguments --release --from is required"),
    (["set", "--from", "2026-05-01T00:00"], "no time zone"),
    (["set", "--from", "yesterday"], "not an ISO 8601 time"),
    (["set", "--from", "2026-05-01T00:00Z"], "needs both --from and --to"),
    (["set", "--release", "v1", "--to", "2026-05-01T00:00Z"], "not both"),
])
def test_bad_arguments_are_usage_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        anchor_main(argv)
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_anchor_through_the_server(chdb_store: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tenant = "anchor-srv-" + os.urandom(4).hex()
    with running(chdb_store, str(tmp_path / "spool"), tokens={"tok": tenant}) as (url, _):
        remote = ["--server", url, "--token", "tok"]
        assert anchor_main(["set", "--service", "qa", "--release", "v9", *remote]) == 0
        assert f"tenant {tenant}" in capsys.readouterr().out
        found = anchor_for(chdb_store, tenant=tenant, service="qa")
        assert found is not None and found.release == "v9"
        assert anchor_main(["set", "--release", " ", *remote]) == 1  # the server's refusal, said
        assert "empty" in capsys.readouterr().err
        assert anchor_main(["show", "--service", "qa", *remote]) == 0
        assert "release v9" in capsys.readouterr().out
        with pytest.raises(SystemExit):  # the token picks the tenant: a --tenant beside --server is refused
            anchor_main(["show", *remote, "--tenant", "x"])
        assert "token" in capsys.readouterr().err
        assert anchor_main(["clear", "--service", "qa", *remote]) == 0
        assert anchor_for(chdb_store, tenant=tenant, service="qa") is None
        assert anchor_main(["show", "--service", "qa", "--server", url, "--token", "wrong"]) == 1
        assert "401" in capsys.readouterr().err
