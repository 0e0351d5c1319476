"""Reference (correct) answers as stored: sent on a trace's root span (``ragtrace.reference.answer``,
keyed by the trace) or imported by query id (`ragtrace labels import REFS.jsonl`). The newest
version of each (query id, trace id) counts; `read_traces` gives a trace its own, else its query id's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ragtrace_store.clock import utc_now

if TYPE_CHECKING:
    from ragtrace_store.client import Store

__all__ = ["add_reference_answers"]

#: rows written in one insert (a large file is written in parts)
_BATCH = 50_000


def add_reference_answers(store: Store, references: Mapping[str, str], *, tenant: str, source: str = "import") -> int:
    """Store ``{query id: reference}`` (each replacing an earlier reference of its query id);
    returns how many were written."""
    now = utc_now()
    rows = [(tenant, query_id, "", reference, source, now) for query_id, reference in references.items()]
    for i in range(0, len(rows), _BATCH):
        store.insert("reference_answers", rows[i:i + _BATCH],
                     ["tenant", "query_id", "trace_id", "reference", "source", "added_at"])
    return len(rows)
