"""Gold ids and user feedback after the fact, by trace id or by ``ragtrace.query.id``.

Each call emits one small *annotation span*, the root of its own trace, carrying
``ragtrace.annotation.kind`` (``gold`` | ``feedback``), the annotated trace
(``ragtrace.annotates.trace_id``) and/or ``ragtrace.query.id``, and the payload
(``ragtrace.gold.document_ids`` or ``ragtrace.feedback.score``/``.comment``). The collector stores
them in its gold and feedback tables. Annotations are never sampled out: a gold label for a query
id is worth keeping whichever trace it meets.

Both functions return True when the annotation was queued and never raise; a bad argument is
logged (once a minute) and the call returns False.
"""

from __future__ import annotations

import math
import string
import time
from collections.abc import Iterable
from typing import Any

from ragtrace import _runtime as rt
from ragtrace import semconv as sc
from ragtrace._explicit import gold_id_list
from ragtrace._runtime import ANNOTATION, SpanRecord, log_once

_HEX = frozenset(string.hexdigits)


def normalize_trace_id(value: object) -> str | None:
    """32 lowercase hex digits from an int, hex string or UUID-style string; None if invalid."""
    if isinstance(value, int) and not isinstance(value, bool):
        return format(value, "032x") if 0 < value < (1 << 128) else None
    if isinstance(value, str):
        text = value.strip().lower().replace("-", "")
        if len(text) == 32 and set(text) <= _HEX and text != "0" * 32:
            return text
    return None


def _emit(kind: str, payload: dict[str, Any], trace_id: object, query_id: object) -> bool:
    runtime = rt.runtime()
    if runtime is None:
        return False
    attrs: dict[str, Any] = {sc.ANNOTATION_KIND: kind}
    if trace_id is None and query_id is None:
        trace_id = rt.current_trace_id()
        if trace_id is None:
            log_once("annotate-target", "ragtrace: attach_%s needs trace_id= or query_id= outside a "
                     "traced query; ignored", kind)
            return False
    if trace_id is not None:
        normalized = normalize_trace_id(trace_id)
        if normalized is None:
            log_once("annotate-trace-id", "ragtrace: attach_%s: %r is not a trace id (32 hex digits); "
                     "ignored", kind, trace_id)
            return False
        attrs[sc.ANNOTATES_TRACE_ID] = normalized
    if query_id is not None:
        attrs[sc.QUERY_ID] = str(query_id)
    attrs.update(payload)
    rec = SpanRecord(ANNOTATION, f"ragtrace.annotation.{kind}", rt.new_trace_id(), rt.new_span_id(),
                     None, True)
    rec.annotation = attrs
    rec.end_ns = time.time_ns()
    runtime.queue.put(rec)
    return True


def attach_gold(ids: Iterable[Any], *, trace_id: str | int | None = None,
                query_id: str | None = None) -> bool:
    """Known-relevant document ids for a query, by ``trace_id`` and/or ``query_id``.

    Without either, inside a traced query, they go on the current query's root span directly.
    """
    try:
        gold = tuple(gold_id_list(ids))
        if trace_id is None and query_id is None and rt.current_root() is not None:
            root = rt.current_root()
            assert root is not None
            root.gold_ids = list(gold)
            return True
        return _emit("gold", {sc.GOLD_DOCUMENT_IDS: gold}, trace_id, query_id)
    except Exception:
        log_once("annotate", "ragtrace: attach_gold failed", exc_info=True)
        return False


def attach_feedback(score: float | bool | None = None, *, trace_id: str | int | None = None,
                    query_id: str | None = None, comment: str | None = None) -> bool:
    """User feedback on an answer: ``score`` in [0, 1] (``True``/``False`` = thumbs up/down) and/or
    a free-text ``comment``. Without ``trace_id``/``query_id`` it annotates the current trace."""
    try:
        payload: dict[str, Any] = {}
        if score is not None:
            value = float(score)
            if not (math.isfinite(value) and 0.0 <= value <= 1.0):
                log_once("feedback-score", "ragtrace: attach_feedback: score %r is outside [0, 1]; ignored",
                         score)
                return False
            payload[sc.FEEDBACK_SCORE] = value
        if comment is not None:
            payload[sc.FEEDBACK_COMMENT] = str(comment)
        if not payload:
            log_once("feedback-empty", "ragtrace: attach_feedback needs a score or a comment; ignored")
            return False
        return _emit("feedback", payload, trace_id, query_id)
    except Exception:
        log_once("annotate", "ragtrace: attach_feedback failed", exc_info=True)
        return False
