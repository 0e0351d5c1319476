"""Span records -> flattened OpenInference spans. Runs on the export thread only.

Everything the request path deferred happens here: recognising document shapes, redaction,
content hashing, truncation, JSON metadata and the flattened attribute names of the wire contract
(``ragtrace.semconv``). Within one batch each distinct passage text is redacted and hashed once,
since the same passages appear in retrieval, rerank and context spans.

A record that cannot be flattened (a user adapter raising, say) is dropped and counted, never
exported half-redacted: if the redactor fails on a text, that text is left out.
"""

from __future__ import annotations

import hashlib
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from ragtrace import semconv as sc
from ragtrace._config import ContentMode, Redactor, Settings
from ragtrace._documents import Document, to_document
from ragtrace._runtime import (
    ANNOTATION,
    GENERATOR,
    PIPELINE,
    REQUEST,
    RERANKER,
    RETRIEVER,
    SpanRecord,
    log_once,
)
from ragtrace._version import VERSION

AttrValue = str | bool | int | float | tuple[str, ...]

# OTLP span kinds and status codes (the protobuf enum values).
KIND_INTERNAL: Final = 1
KIND_SERVER: Final = 2
STATUS_UNSET: Final = 0
STATUS_ERROR: Final = 2

_STAGE_KIND: Final = {
    PIPELINE: sc.SpanKind.CHAIN.value,
    REQUEST: sc.SpanKind.CHAIN.value,
    RETRIEVER: sc.SpanKind.RETRIEVER.value,
    RERANKER: sc.SpanKind.RERANKER.value,
    GENERATOR: sc.SpanKind.LLM.value,
}
_ANSWER_KEYS: Final = ("answer", "output", "response", "text", "content")


@dataclass(frozen=True)
class FlatEvent:
    name: str
    time_ns: int
    attributes: Mapping[str, AttrValue]


@dataclass(frozen=True)
class FlatSpan:
    """A finished span with its final attributes, independent of any exporter."""

    name: str
    trace_id: int
    span_id: int
    parent_id: int | None
    kind: int  # OTLP SpanKind value
    start_ns: int
    end_ns: int
    attributes: dict[str, AttrValue]
    status_code: int = STATUS_UNSET
    status_message: str = ""
    events: tuple[FlatEvent, ...] = field(default=())
    parent_remote: bool = False  # the parent came from another process (traceparent header)


def answer_text(value: object) -> str | None:
    """The text of an answer in the shapes services return (str, bytes, {"answer": ...}, objects)."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, Mapping):
        for key in _ANSWER_KEYS:
            inner = value.get(key)
            if isinstance(inner, str):
                return inner
        return None
    if isinstance(value, int | float):
        return str(value)
    for key in _ANSWER_KEYS:
        inner = getattr(value, key, None)
        if isinstance(inner, str):
            return inner
    return None


def stream_text(chunks: Sequence[object]) -> str:
    """A streamed answer is the concatenation of its chunks."""
    parts = []
    for chunk in chunks:
        text = answer_text(chunk)
        if text is not None:
            parts.append(text)
    return "".join(parts)


class Flattener:
    """Turns records into FlatSpans under one configuration's content mode and redactor."""

    def __init__(self, settings: Settings) -> None:
        self._content: ContentMode = settings.content
        self._content_label = str(settings.content)
        self._redact: Redactor | None = settings.redact
        self._keys: dict[tuple[str, int], tuple[str, str, str, str, str]] = {}
        self._stacks: dict[int, tuple[BaseException, str]] = {}

    def flatten(self, records: Sequence[SpanRecord]) -> tuple[list[FlatSpan], int]:
        """Returns the flattened spans and the number of records that failed."""
        texts: dict[str, tuple[str | None, str | None]] = {}  # raw text -> (redacted, sha256)
        # an exception that passed through nested spans is on each of them: formatted once
        self._stacks = {}
        spans: list[FlatSpan] = []
        failed = 0
        for rec in records:
            try:
                spans.append(self._one(rec, texts))
            except Exception as exc:
                failed += 1
                log_once("flatten", "ragtrace: dropped a %s span that could not be recorded: %r",
                         rec.name, exc)
            # Drop references to user objects now: an exception's traceback holds its frames,
            # which often hold the record (a cycle the GC would otherwise have to find).
            rec.error = None
            rec.documents = rec.input_documents = rec.chunks = None
            rec.input = rec.output = None
        self._stacks = {}
        return spans, failed

    # --- one record --------------------------------------------------------------------------

    def _one(self, rec: SpanRecord, texts: dict[str, tuple[str | None, str | None]]) -> FlatSpan:
        attrs: dict[str, AttrValue] = {}
        stage = rec.stage
        if stage == ANNOTATION:
            if rec.annotation:
                attrs.update(rec.annotation)
        else:
            attrs[sc.SPAN_KIND] = _STAGE_KIND[stage]
            output = stream_text(rec.chunks) if rec.chunks is not None else answer_text(rec.output)
            # Every span says how its text was cut: the collector reads it per document span.
            attrs[sc.CONTENT_MODE] = self._content_label
            if stage in (PIPELINE, REQUEST):
                self._text(attrs, sc.INPUT_VALUE, rec.input)
                self._text(attrs, sc.OUTPUT_VALUE, output)
                # Marks the query root for readers of the trace. A request span that contains a
                # pipeline carries its query and answer too, but the pipeline span is the root; a
                # pipeline nested in another pipeline is a sub-step, not a root.
                if (stage == PIPELINE and not rec.nested) or (stage == REQUEST and not rec.has_pipeline):
                    attrs[sc.SDK_VERSION] = VERSION
            elif stage == RETRIEVER:
                self._text(attrs, sc.INPUT_VALUE, rec.input)
                self._documents(attrs, sc.RETRIEVAL_DOCUMENTS, rec.documents, rec, texts)
            elif stage == RERANKER:
                self._text(attrs, sc.RERANKER_QUERY, rec.input)
                top_k = rec.top_k if _int64(rec.top_k) else (
                    len(rec.documents) if rec.documents is not None else None)
                if top_k is not None:
                    attrs[sc.RERANKER_TOP_K] = top_k
                if rec.model:
                    attrs[sc.RERANKER_MODEL_NAME] = str(rec.model)
                self._documents(attrs, sc.RERANKER_INPUT_DOCUMENTS, rec.input_documents, rec, texts)
                self._documents(attrs, sc.RERANKER_OUTPUT_DOCUMENTS, rec.documents, rec, texts)
            elif stage == GENERATOR:
                self._text(attrs, sc.INPUT_VALUE, rec.input)
                self._text(attrs, sc.OUTPUT_VALUE, output)
                if rec.model:
                    attrs[sc.LLM_MODEL_NAME] = str(rec.model)
                self._documents(attrs, sc.CONTEXT_DOCUMENTS, rec.documents, rec, texts)
            if rec.query_id is not None:
                attrs[sc.QUERY_ID] = str(rec.query_id)
            if rec.gold_ids is not None:
                attrs[sc.GOLD_DOCUMENT_IDS] = tuple(str(g) for g in rec.gold_ids)
            if rec.streamed:
                attrs[sc.ANSWER_STREAMED] = True
            if rec.http:
                attrs.update(rec.http)
        if rec.attributes:
            for key, value in rec.attributes.items():
                attrs[key] = _attribute_value(value)
        status, message = STATUS_UNSET, ""
        events: tuple[FlatEvent, ...] = ()
        http_status = rec.http.get(sc.HTTP_RESPONSE_STATUS_CODE) if rec.http else None
        if isinstance(http_status, int) and http_status >= 500:  # server spans: 5xx is an error
            status, message = STATUS_ERROR, f"HTTP {http_status}"
        if rec.error is not None:
            if isinstance(rec.error, GeneratorExit):
                attrs[sc.STREAM_CLOSED_EARLY] = True
            else:
                status, message, events = STATUS_ERROR, _error_message(rec.error), (self._error_event(rec),)
        return FlatSpan(
            name=rec.name, trace_id=rec.trace_id, span_id=rec.span_id, parent_id=rec.parent_id,
            kind=KIND_SERVER if stage == REQUEST else KIND_INTERNAL, start_ns=rec.start_ns,
            end_ns=rec.end_ns, attributes=attrs, status_code=status, status_message=message,
            events=events, parent_remote=rec.remote_parent,
        )

    def _error_event(self, rec: SpanRecord) -> FlatEvent:
        exc = rec.error
        assert exc is not None
        # keyed by id, the exception held beside its stack: a freed one's id could be another's
        cached = self._stacks.get(id(exc))
        if cached is None:
            cached = self._stacks[id(exc)] = (exc, _stack(exc))
        return _error_event(rec, cached[1])

    def _text(self, attrs: dict[str, AttrValue], key: str, value: object) -> None:
        text = value if isinstance(value, str) else answer_text(value)
        if text is None:
            return
        if self._redact is not None:
            text = self._redacted(text)
            if text is None:
                return
        attrs[key] = text

    def _redacted(self, text: str) -> str | None:
        """``redact`` applied to ``text``; None (the text left out) when it raises or returns
        anything but a str, which would fail the encoding of the whole export request."""
        assert self._redact is not None
        try:
            out = self._redact(text)
        except Exception as exc:
            log_once("redact", "ragtrace: redact raised %r; the text was left out", exc)
            return None
        if not isinstance(out, str):
            log_once("redact-type", "ragtrace: redact returned %s, not a str; the text was left out",
                     type(out).__name__)
            return None
        return out

    def _passage(self, raw: str, texts: dict[str, tuple[str | None, str | None]]) -> tuple[str | None, str | None]:
        cached = texts.get(raw)
        if cached is not None:
            return cached
        text = self._redacted(raw) if self._redact is not None else raw
        # the bytes the encoder sends (a lone surrogate becomes "?"), so the collector's check holds
        digest = hashlib.sha256(text.encode("utf-8", "replace")).hexdigest() if text is not None else None
        texts[raw] = (text, digest)
        return text, digest

    def _key_set(self, prefix: str, index: int) -> tuple[str, str, str, str, str]:
        keys = self._keys.get((prefix, index))
        if keys is None:
            base = f"{prefix}.{index}."
            keys = (base + sc.DOCUMENT_ID, base + sc.DOCUMENT_SCORE, base + sc.DOCUMENT_CONTENT,
                    base + sc.DOCUMENT_CONTENT_HASH, base + sc.DOCUMENT_METADATA)
            if len(self._keys) < 65536:
                self._keys[(prefix, index)] = keys
        return keys

    def _documents(self, attrs: dict[str, AttrValue], prefix: str, docs: list[Any] | None, rec: SpanRecord,
                   texts: dict[str, tuple[str | None, str | None]]) -> None:
        if not docs:
            return
        mode = self._content.kind
        limit = self._content.limit
        for index, raw in enumerate(docs):
            try:
                doc = to_document(raw, rec.adapter)
            except Exception as exc:
                # Keep the rank slot so later ranks stay right; the document is just unidentified.
                log_once("document-shape", "ragtrace: could not read a document in %s: %r", prefix, exc)
                doc = Document()
            key_id, key_score, key_content, key_hash, key_meta = self._key_set(prefix, index)
            text, digest = self._passage(doc.text, texts) if doc.text is not None else (None, None)
            # Same stand-in as the collector uses for OpenInference documents without an id.
            doc_id = doc.id if doc.id is not None else (f"sha256:{digest[:16]}" if digest else None)
            if doc_id is not None:
                attrs[key_id] = doc_id
            if doc.score is not None:
                attrs[key_score] = doc.score
            if text is not None:
                if mode == "full":
                    attrs[key_content] = text
                elif mode == "truncate":
                    attrs[key_content] = text[:limit]
            if digest is not None:
                attrs[key_hash] = digest
            if doc.metadata:
                attrs[key_meta] = orjson.dumps(
                    doc.metadata, default=str, option=orjson.OPT_NON_STR_KEYS).decode()


_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1


def _int64(value: object) -> bool:
    """Whether OTLP can carry ``value`` as an int (an AnyValue int is 64-bit)."""
    return isinstance(value, int) and not isinstance(value, bool) and _INT64_MIN <= value <= _INT64_MAX


def _attribute_value(value: object) -> AttrValue:
    """User-set attribute values, coerced to what OTLP carries (an int beyond 64 bits as its text:
    encoded as a varint it would corrupt the whole export request)."""
    if isinstance(value, int) and not isinstance(value, bool) and not _int64(value):
        return str(value)
    if isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, list | tuple):
        return tuple(str(v) for v in value)
    return str(value)


def _error_message(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


#: frames of an ``exception.stacktrace``, innermost kept: a RecursionError through nested
#: pipelines has ~1000 frames on each of hundreds of spans (63 MB of text, 22 s of the export
#: thread holding the GIL, before the bound)
MAX_STACK_FRAMES: Final = 64


def _stack(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-MAX_STACK_FRAMES))


def _error_event(rec: SpanRecord, stack: str) -> FlatEvent:
    exc = rec.error
    assert exc is not None
    return FlatEvent(sc.EXCEPTION_EVENT, rec.end_ns, {
        sc.EXCEPTION_TYPE: f"{type(exc).__module__}.{type(exc).__qualname__}"
        if type(exc).__module__ != "builtins" else type(exc).__qualname__,
        sc.EXCEPTION_MESSAGE: str(exc),
        sc.EXCEPTION_STACKTRACE: stack,
    })
