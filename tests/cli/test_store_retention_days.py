"""`ragtrace store retention --days N` with an N so large that the TTL's DateTime arithmetic would
wrap into the past (and expire every row) is refused before the store is touched."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ragtrace_cli.commands.store import MAX_RETENTION_DAYS, PASSAGE_MARGIN_DAYS, store_main


def test_the_engine_wraps_a_ttl_beyond_the_datetime_range(chdb_store: Any) -> None:
    # what the refused values would do, and that the largest accepted one does not, from a day ahead
    rows = chdb_store.query_rows(
        "SELECT toDateTime(now()) + INTERVAL 30000 DAY < now(), "
        "toDateTime(now() + INTERVAL 1 DAY) + INTERVAL {d:UInt32} DAY > now()",
        {"d": MAX_RETENTION_DAYS + PASSAGE_MARGIN_DAYS})
    assert rows == [(True, True)] or rows == [(1, 1)]


@pytest.mark.parametrize("days", [MAX_RETENTION_DAYS + 1, 30000, -1])
def test_retention_days_out_of_range_is_refused_first(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      days: int) -> None:
    with pytest.raises(SystemExit) as exc:
        store_main(["retention", "--store", str(tmp_path / "store"), "--days", str(days)])
    assert exc.value.code == 2
    assert f"--days must be in 0..{MAX_RETENTION_DAYS} (0 keeps forever), got {days}" in capsys.readouterr().err
