"""Spans of other instrumentation than ragtrace's SDK: what their OpenInference and GenAI attributes mean.

LangChain, LlamaIndex and the OpenTelemetry GenAI conventions send no ``ragtrace.*`` attributes, so:
- a span without ``openinference.span.kind`` takes its kind from ``gen_ai.operation.name``;
- a span without ``ragtrace.query.id`` takes its query id from its OpenInference ``metadata``, its
  ``session.id`` or its ``gen_ai.conversation.id`` (`query_id_of`);
- ``gen_ai.retrieval.documents`` (an array of maps, or its JSON) becomes ``documents`` rows like
  OpenInference's (`gen_ai_documents`; the compiled walk makes the rows).
"""

from __future__ import annotations

import math
from typing import Any

import orjson

from ragtrace import semconv as sc
from ragtrace_collector.documents import MAX_RANK, GenAiDocument
from ragtrace_collector.values import text_of

#: ``gen_ai.operation.name`` values (OpenTelemetry GenAI conventions) → the OpenInference kind they
#: are read as, for spans that carry no ``openinference.span.kind``
GEN_AI_KINDS = {"retrieval": sc.SpanKind.RETRIEVER.value, "chat": sc.SpanKind.LLM.value,
                "text_completion": sc.SpanKind.LLM.value, "generate_content": sc.SpanKind.LLM.value,
                "embeddings": sc.SpanKind.EMBEDDING.value}
#: keys of the root's OpenInference ``metadata`` JSON that hold the query id, in order
QUERY_ID_METADATA_KEYS = (sc.QUERY_ID, "query_id")


def gen_ai_kind(other: dict[str, Any]) -> str:
    """The span kind ``gen_ai.operation.name`` stands for, "" for none."""
    op = other.get(sc.GEN_AI_OPERATION_NAME)
    return GEN_AI_KINDS.get(op, "") if isinstance(op, str) else ""


def query_id_of(other: dict[str, Any]) -> str:
    """The query id of a span without ``ragtrace.query.id``: a `QUERY_ID_METADATA_KEYS` key of its
    OpenInference ``metadata`` (LangChain ``config={"metadata": ...}``, ``using_metadata``), else its
    ``session.id`` (``using_session``), else its GenAI ``gen_ai.conversation.id``; "" for none. A
    session id is a query id only where a session is one query (an evaluation run): the README says so."""
    meta = other.get(sc.METADATA)
    if isinstance(meta, str) and meta.startswith("{"):
        try:
            meta = orjson.loads(meta)
        except orjson.JSONDecodeError:
            meta = None
    if isinstance(meta, dict):
        for key in QUERY_ID_METADATA_KEYS:
            value = meta.get(key)
            if isinstance(value, str | int) and not isinstance(value, bool) and str(value):
                return str(value)
    for key in (sc.SESSION_ID, sc.GEN_AI_CONVERSATION_ID):
        value = other.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def gen_ai_documents(value: Any) -> list[GenAiDocument] | None:
    """``gen_ai.retrieval.documents`` (structured: an array of maps; or its JSON string) as the walk's
    document list (stage ``retrieved``, rank = index, at most `MAX_RANK` + 1), None when it is
    neither. Of each map: ``id`` (as text; none, or a boolean, is no id), ``score`` (a finite number),
    ``content`` (a non-empty string) and ``metadata`` (any value, kept as JSON)."""
    if isinstance(value, str):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            return None
    if not isinstance(value, list) or not all(isinstance(x, dict) for x in value):
        return None
    listed: list[GenAiDocument] = []
    for doc in value[: MAX_RANK + 1]:
        doc_id = doc.get("id")
        score = doc.get("score")
        content = doc.get("content")
        meta = doc.get("metadata")
        listed.append(("" if doc_id is None or isinstance(doc_id, bool) else text_of(doc_id),
                       float(score) if isinstance(score, int | float) and not isinstance(score, bool)
                       and math.isfinite(score) else None,
                       content if isinstance(content, str) and content else None,
                       None if meta is None else text_of(meta)))
    return listed
