"""Review sessions and leases are right in every process time zone.

clickhouse-connect reads a naive datetime as local time. Before the store became aware-UTC end to
end, under TZ=America/New_York a 30-minute lease was stored five hours late (read back as 330
minutes), and under TZ=Pacific/Kiritimati (UTC+14) a new session was stored already expired, so
nobody could log in. Each zone runs the whole login → queue → item path through the web routes in
a child process started under that zone (the zone must be set before chDB starts).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("zone", ["America/New_York", "Pacific/Kiritimati", "Asia/Tokyo", "UTC"])
def test_login_and_lease_hold_in_every_zone(zone: str, tmp_path: Path) -> None:
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "TZ": zone, "PYTHONPATH": path}
    proc = subprocess.run([sys.executable, str(REPO / "tests" / "security" / "_tz_child.py"), str(tmp_path / "store")],
                          env=env, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    if zone != "UTC":
        assert got["tz"] != ["UTC", "UTC"], "the child did not run in the zone"
    # a new session is live: the login lands on the queue page, not back on the login form
    assert got["login_status"] == 303 and got["login_location"] == "/review/queues/tzq"
    assert got["queue_page_status"] == 200, got
    assert got["item_status"] == 200 and got["item_shows_trace"]
    # the stored times are the real ones: written during this run, 12 h and 30 min long
    assert got["session_created_within_run"] and got["session_hours"] == 12.0, got
    assert got["lease_assigned_within_run"] and got["lease_minutes"] == 30.0, got
