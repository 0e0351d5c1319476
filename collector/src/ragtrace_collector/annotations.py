"""What spans say about a trace's quality: gold document ids and feedback, as ``gold`` and ``feedback`` rows.

Gold ids (``ragtrace.gold.document_ids``) may sit on any span of the trace they are about; an
annotation span (``ragtrace.annotates.trace_id`` and/or ``ragtrace.annotation.kind``, sent by
``ragtrace.attach_gold`` and ``ragtrace.feedback``) carries gold or feedback about another trace,
or about every trace of a query id, and is never a query of its own.
"""

from __future__ import annotations

from typing import Any

import orjson

from ragtrace import semconv as sc
from ragtrace_collector.rows import Rows
from ragtrace_collector.values import text_of

#: why gold ids of an unreadable type are not stored (said to the sender, not dropped in silence)
GOLD_IDS_TYPE = (f"{sc.GOLD_DOCUMENT_IDS} must be an array of document ids (strings or integers), or one id; "
                 "got a {type}: no gold stored from that span")


def _str_list(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(x) for x in value if x is not None and str(x) != ""]
    if isinstance(value, str) and value:
        # tolerate a JSON-encoded array or a single id
        if value.startswith("["):
            try:
                parsed = orjson.loads(value)
            except orjson.JSONDecodeError:
                return [value]
            return _str_list(parsed) if isinstance(parsed, list) else [value]
        return [value]
    return []


def gold_ids(rows: Rows, value: Any) -> list[str]:
    """A span's gold ids: an array of ids (or its JSON), one string id or one integer id; any other
    type is told to the sender (partial_success) instead of storing no gold without a word."""
    if isinstance(value, int) and not isinstance(value, bool):
        return [str(value)]
    if value is None or isinstance(value, list | str):
        return _str_list(value)
    rows.note(GOLD_IDS_TYPE.format(type={bool: "boolean", float: "double", dict: "key-value list"}.get(
        type(value), type(value).__name__)))
    return []


def add_gold(rows: Rows, tenant: str, query_id: str, trace_id: str, doc_id: str, at: int,
             relevance: int = 1) -> None:
    """One ``gold`` row, from a span (``source`` "span")."""
    g = rows.cols["gold"]
    g["tenant"].append(tenant)
    g["query_id"].append(query_id)
    g["trace_id"].append(trace_id)
    g["doc_id"].append(doc_id)
    g["relevance"].append(relevance)
    g["source"].append("span")
    g["added_at"].append(at)


def add_annotation(rows: Rows, tenant: str, span_id: str, other: dict[str, Any], annotated: str,
                   query_id: str, received_ms: int) -> None:
    """The ``gold`` or ``feedback`` rows of an annotation span about trace ``annotated`` (lower-case
    hex, "" for none) or query ``query_id``; what cannot be stored is told to the sender."""
    if not annotated and not query_id:
        rows.note(f"an annotation needs {sc.ANNOTATES_TRACE_ID} or {sc.QUERY_ID}; kept only as a raw span")
        return
    if annotated and (len(annotated) != 32 or any(ch not in "0123456789abcdef" for ch in annotated)):
        rows.note(f"{sc.ANNOTATES_TRACE_ID} must be 32 hex characters; annotation kept only as a raw span")
        return
    kind = text_of(other.get(sc.ANNOTATION_KIND)).lower()
    if kind == "gold":
        for doc_id in gold_ids(rows, other.get(sc.GOLD_DOCUMENT_IDS)):
            add_gold(rows, tenant, query_id, annotated, doc_id, received_ms)
    elif kind == "feedback":
        raw = other.get(sc.FEEDBACK_SCORE)
        score = float(raw) if isinstance(raw, (int, float)) and not isinstance(raw, bool) else None
        if score is not None and not 0.0 <= score <= 1.0:  # NaN fails this too
            score = None
        if raw is not None and score is None:
            # the comment is kept; the sender hears why the score is not (the SDK refuses it itself)
            rows.note(f"{sc.FEEDBACK_SCORE} must be a number in [0, 1] (True/False as 1/0 in the SDK); got "
                      f"{str(raw)[:40]!r}: the feedback is stored without its score")
        fb = rows.cols["feedback"]
        fb["tenant"].append(tenant)
        fb["trace_id"].append(annotated)
        fb["query_id"].append(query_id)
        fb["span_id"].append(span_id)
        fb["score"].append(score)
        fb["comment"].append(text_of(other.get(sc.FEEDBACK_COMMENT)))
        fb["added_at"].append(received_ms)
    else:
        rows.note(f"{sc.ANNOTATION_KIND} must be 'gold' or 'feedback'; annotation kept only as a raw span")
