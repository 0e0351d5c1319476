"""Run in a child process under a given ``TZ`` (see test_time_zones.py): a reviewer logs in through
the web route on a fresh embedded store, takes an item from a queue, and this prints what the store
says about the session and the lease as one JSON object.

A child process because the process's zone must be set before chDB and the client start, and because
one process may open only one embedded store (the test process has its own).
"""

from __future__ import annotations

import json
import re
import sys
import time
from datetime import UTC, datetime
from types import SimpleNamespace

from fastapi import FastAPI
from fastapi.testclient import TestClient

from ragtrace_review import auth
from ragtrace_review.queues import enqueue
from ragtrace_review.web import mount
from ragtrace_store import open_store
from tests.review.rows import label_record, sample_trace, write_labels, write_trace

TENANT = "tz"


# Local on purpose (not ragtrace_store.clock): this check must also run against a store that predates it.
def utc_now() -> datetime:
    return datetime.now(UTC)


def as_utc(value: datetime) -> datetime:
    """A time read back from the store, in UTC; a naive one is taken as UTC, as the schema's columns are."""
    return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)


def main(store_dir: str) -> None:
    store = open_store(store_dir, migrate=True)
    try:
        write_trace(store, TENANT, sample_trace("tz-trace"))
        write_labels(store, TENANT, [label_record("tz-trace", "fabrication", query_id="q-tz")])
        enqueue(store, "tzq", None, per_mode=5, reviewers=1, tenant=TENANT)
        _, token = auth.add_reviewer(store, "zoe", tenant=TENANT)
        app = FastAPI()
        mount(app, lambda: store, SimpleNamespace(review_secret="tz"))
        before = utc_now()
        with TestClient(app, follow_redirects=False) as client:
            page = client.get("/review/login").text
            csrf = re.search(r'name="csrf_token" value="([^"]+)"', page)
            assert csrf, page
            login = client.post("/review/login", data={"csrf_token": csrf.group(1), "token": token,
                                                       "next": "/review/queues/tzq"})
            queue_page = client.get("/review/queues/tzq", headers={"accept": "text/html"})
            taken = client.get("/review/queues/tzq/next", headers={"accept": "text/html"})
            item = client.get(taken.headers.get("location", "/"), headers={"accept": "text/html"})
        after = utc_now()
        sessions = store.query_rows(
            f"SELECT created_at, expires_at FROM {store.table('review_sessions')} FINAL WHERE tenant = {{t:String}}",
            {"t": TENANT})
        leases = store.query_rows(
            f"SELECT assigned_at, expires_at FROM {store.table('review_assignments')} FINAL "
            "WHERE tenant = {t:String}", {"t": TENANT})
        # no session or no lease (the login did not hold): the parent's assertions say which
        session = sessions[0] if sessions else (after, after)
        lease = leases[0] if leases else (after, after)
        print(json.dumps({
            "tz": time.tzname,
            "login_status": login.status_code, "login_location": login.headers.get("location"),
            "queue_page_status": queue_page.status_code, "queue_page_location": queue_page.headers.get("location"),
            "item_status": item.status_code, "item_shows_trace": "tz-trace" in item.text,
            # stored times are DateTime64(3): truncated to the millisecond, so at most 1 ms before `before`
            "session_hours": (as_utc(session[1]) - as_utc(session[0])).total_seconds() / 3600,
            "session_created_within_run": before.timestamp() - 0.001 <= as_utc(session[0]).timestamp()
                                          <= after.timestamp(),
            "lease_minutes": (as_utc(lease[1]) - as_utc(lease[0])).total_seconds() / 60,
            "lease_assigned_within_run": before.timestamp() - 0.001 <= as_utc(lease[0]).timestamp()
                                         <= after.timestamp(),
        }))
    finally:
        store.close()


if __name__ == "__main__":
    main(sys.argv[1])
