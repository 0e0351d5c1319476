"""`ragtrace_store.query_roots` on the real engine: the rule written in migration 0010's views is the
store's own, and `mark_stored` copies exactly the roots that are queries, embedded (ids read in place)
and through a server (ids as parameters, in chunks)."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from importlib import resources
from typing import Any

import pytest

from ragtrace_store import Store, open_store
from ragtrace_store import client as store_client
from ragtrace_store.assembly import STAGE_KINDS
from ragtrace_store.query_roots import mark_stored

T0 = datetime(2026, 10, 7, 8, 0, tzinfo=UTC)
Q_COLS = ["tenant", "trace_id", "span_id", "release", "start_time", "root_priority", "kind", "received_at"]
S_COLS = ["tenant", "trace_id", "span_id", "parent_span_id", "name", "kind", "start_time", "end_time", "received_at"]


def test_the_views_name_the_stores_stage_kinds() -> None:
    sql = resources.files("ragtrace_store").joinpath("migrations", "single", "0010_query_roots.sql").read_text()
    lists = re.findall(r"kind (?:NOT )?IN \(([^)]*)\)", sql)
    assert len(lists) == 4  # two views, two backfills
    for found in lists:
        assert tuple(k.strip().strip("'") for k in found.split(",")) == STAGE_KINDS


@pytest.mark.parametrize("where", ["embedded", "server"])
def test_mark_stored_copies_the_roots_that_are_queries(chdb_store: Any, chdb_http_server: str, where: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    db = f"qr_{uuid.uuid4().hex[:8]}"
    if where == "embedded":
        st = Store(chdb_store.client, db, location=chdb_store.location, embedded=True)
        st.lock = chdb_store.lock
        st.migrate()
    else:
        st = open_store(chdb_http_server.rsplit("/", 1)[0] + "/" + db)
        monkeypatch.setattr(store_client, "_ID_CHUNK", 2)  # several statements, each its own chunk
    try:
        t = "t"
        roots = [  # (trace, span, priority, kind): which are queries once stage spans are stored
            ("chain", "c", 2, "CHAIN"),          # a stage span below: a query
            ("http", "h", 1, ""),                # a stage span below: a query
            ("bare", "b", 1, "RETRIEVER"),       # itself a retriever: never
            ("lonely", "l", 1, ""),              # no stage span: not (yet)
            ("sdk", "s", 3, "CHAIN"),            # the SDK's: the view copies it whatever the spans
        ]
        st.insert("queries", [(t, tid, sid, "r1", T0, p, k, T0) for tid, sid, p, k in roots], Q_COLS)
        st.insert("spans", [(t, tid, f"{tid}-r", sid, "retrieve", "RETRIEVER", T0, T0, T0)
                            for tid, sid, _p, _k in roots if tid in ("chain", "http", "bare")], S_COLS)
        st.insert("spans", [(t, "other", "o", "", "llm", "LLM", T0, T0, T0)], S_COLS)  # another trace's

        def marked() -> list[tuple[str, str]]:
            return sorted((r[0], r[1]) for r in st.query_rows(
                f"SELECT DISTINCT trace_id, span_id FROM {st.table('query_roots')} WHERE tenant = 't'"))

        assert marked() == [("sdk", "s")]
        mark_stored(st, t, ["chain", "http", "bare", "lonely", "sdk", "unknown", "chain"])
        assert marked() == [("chain", "c"), ("http", "h"), ("sdk", "s")]
        # the lonely root's stage span arrives: asked again, it is a query now
        st.insert("spans", [(t, "lonely", "lonely-g", "l", "generate", "LLM", T0, T0, T0)], S_COLS)
        mark_stored(st, t, ["lonely"])
        assert marked() == [("chain", "c"), ("http", "h"), ("lonely", "l"), ("sdk", "s")]
        mark_stored(st, "another tenant", ["chain", "http"])  # the tenant is part of the key
        assert marked() == [("chain", "c"), ("http", "h"), ("lonely", "l"), ("sdk", "s")]
    finally:
        st.command(f"DROP DATABASE IF EXISTS {db}")
        if where == "server":
            st.close()
