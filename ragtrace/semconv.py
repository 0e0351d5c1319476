"""Span attribute names: the wire contract between the SDK, the collector and the evaluator.

Every attribute ragtrace writes or reads is named here and nowhere else. The names follow
OpenInference so spans from other OpenInference instrumentation (LlamaIndex, LangChain, ...)
are understood too; ragtrace adds only what OpenInference lacks, under the ``ragtrace.`` prefix.

Documents are flattened the OpenInference way: ``<prefix>.{i}.document.<field>`` where ``i`` is
the rank from 0, in the order the service used them.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

# --- span kinds (OpenInference) --------------------------------------------------------------
SPAN_KIND: Final = "openinference.span.kind"


class SpanKind(StrEnum):
    """Values of ``openinference.span.kind`` that ragtrace emits or understands."""

    CHAIN = "CHAIN"  # the root span of one query
    RETRIEVER = "RETRIEVER"
    RERANKER = "RERANKER"
    LLM = "LLM"  # the generation step
    EMBEDDING = "EMBEDDING"
    TOOL = "TOOL"
    AGENT = "AGENT"


# --- generic input / output (OpenInference) --------------------------------------------------
INPUT_VALUE: Final = "input.value"
INPUT_MIME_TYPE: Final = "input.mime_type"
OUTPUT_VALUE: Final = "output.value"
OUTPUT_MIME_TYPE: Final = "output.mime_type"

# --- documents (OpenInference) ---------------------------------------------------------------
RETRIEVAL_DOCUMENTS: Final = "retrieval.documents"
RERANKER_INPUT_DOCUMENTS: Final = "reranker.input_documents"
RERANKER_OUTPUT_DOCUMENTS: Final = "reranker.output_documents"
RERANKER_QUERY: Final = "reranker.query"
RERANKER_TOP_K: Final = "reranker.top_k"
RERANKER_MODEL_NAME: Final = "reranker.model_name"
LLM_MODEL_NAME: Final = "llm.model_name"

# --- what other OpenInference instrumentation sends (read by the collector, never written) ----
# The prompt and the answer of an LLM span: flattened messages ``llm.input_messages.{i}.message.content``
# (and ``.message.contents.{j}.message_content.text``), prompts ``llm.prompts`` (a string array, or
# flattened ``llm.prompts.{i}.prompt.text``), the answer ``llm.output_messages.{i}.message.content``.
LLM_INPUT_MESSAGES: Final = "llm.input_messages"
LLM_OUTPUT_MESSAGES: Final = "llm.output_messages"
LLM_PROMPTS: Final = "llm.prompts"
LLM_PROMPT_TEMPLATE_VARIABLES: Final = "llm.prompt_template.variables"  # a JSON object
MESSAGE_CONTENT: Final = "message.content"
SESSION_ID: Final = "session.id"
METADATA: Final = "metadata"  # a JSON object (LangChain's run metadata, `using_metadata`)

# --- OpenTelemetry GenAI semantic conventions (read by the collector, never written) ----------
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"  # "retrieval" | "chat" | "text_completion" | ...
GEN_AI_RETRIEVAL_DOCUMENTS: Final = "gen_ai.retrieval.documents"  # [{id, score, content?}, ...]
GEN_AI_RETRIEVAL_QUERY_TEXT: Final = "gen_ai.retrieval.query.text"
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"  # [{role, parts: [{type, content}]}]
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
GEN_AI_SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"

# Per-document fields, appended after ``<prefix>.{i}.``
DOCUMENT_ID: Final = "document.id"
DOCUMENT_SCORE: Final = "document.score"
DOCUMENT_CONTENT: Final = "document.content"
DOCUMENT_METADATA: Final = "document.metadata"  # a JSON string
# ragtrace: sha256 hex of the original (pre-truncation, post-redaction) content, so passages are
# identifiable when content is truncated or omitted.
DOCUMENT_CONTENT_HASH: Final = "document.content_hash"

# Chunk provenance: where a chunk sits in its source document, so gold labels kept as evidence
# spans in source documents re-resolve against every build's chunks (a re-chunking must not
# manufacture a recall drop). These are keys of the document's ``document.metadata`` JSON object —
# OpenInference's free-form document metadata — not span attributes, so instrumentation that knows
# nothing of ragtrace carries them wherever it carries metadata. Offsets are characters of the
# source's text from 0, start inclusive, end exclusive: ``source_text[start:end]`` is the chunk.
PROVENANCE_SOURCE_ID: Final = "ragtrace.source.id"  # the source document's id
PROVENANCE_START: Final = "ragtrace.source.start"  # int
PROVENANCE_END: Final = "ragtrace.source.end"  # int

# --- ragtrace additions ----------------------------------------------------------------------
QUERY_ID: Final = "ragtrace.query.id"  # optional stable id, joins with gold labels
GOLD_DOCUMENT_IDS: Final = "ragtrace.gold.document_ids"  # string array of known-relevant ids
# optional, on the root span: the reference (correct) answer, so the audit scores correctness
REFERENCE_ANSWER: Final = "ragtrace.reference.answer"
CONTEXT_DOCUMENTS: Final = "ragtrace.context.documents"  # exactly what the generator was given
CONTENT_MODE: Final = "ragtrace.content.mode"  # "full" | "truncate:N" | "hash"
ANSWER_STREAMED: Final = "ragtrace.answer.streamed"  # bool: the answer was a stream of chunks
# bool, only when true: the consumer closed the stream before its end; the answer is what was sent.
STREAM_CLOSED_EARLY: Final = "ragtrace.stream.closed_early"
FEEDBACK_SCORE: Final = "ragtrace.feedback.score"  # float in [0, 1], user feedback after the fact
FEEDBACK_COMMENT: Final = "ragtrace.feedback.comment"
# A span that carries gold ids or feedback after the fact names the trace it is about.
ANNOTATES_TRACE_ID: Final = "ragtrace.annotates.trace_id"  # 32 hex chars
ANNOTATION_KIND: Final = "ragtrace.annotation.kind"  # "gold" | "feedback"
SDK_VERSION: Final = "ragtrace.sdk.version"

# --- evaluation events (OpenTelemetry GenAI semantic conventions) -----------------------------
# Written by `ragtrace serve --export-labels URL` (never by the SDK): each label an audit writes goes
# out as an OTLP log record whose event name is EVALUATION_RESULT_EVENT, carrying the trace id and
# span id of the query it judged, so a tracing backend shows it beside that trace. Its resource is
# the judged trace's service (SERVICE_NAME, SERVICE_VERSION = its release); QUERY_ID names the query.
EVALUATION_RESULT_EVENT: Final = "gen_ai.evaluation.result"
GEN_AI_EVALUATION_NAME: Final = "gen_ai.evaluation.name"  # what was judged, e.g. "ragtrace.failure_mode"
GEN_AI_EVALUATION_SCORE_VALUE: Final = "gen_ai.evaluation.score.value"  # a number, when the label has one
GEN_AI_EVALUATION_SCORE_LABEL: Final = "gen_ai.evaluation.score.label"  # a low-cardinality verdict
GEN_AI_EVALUATION_EXPLANATION: Final = "gen_ai.evaluation.explanation"  # free text: why
# ragtrace: the labeller manifest the label was made under (`ragtrace_evaluator.manifest`)
EVALUATION_MANIFEST_ID: Final = "ragtrace.labeller.manifest_id"
EVALUATION_CONFIDENCE: Final = "ragtrace.evaluation.confidence"  # the labeller's confidence in [0, 1]
EVALUATION_TENANT: Final = "ragtrace.tenant"  # the tenant whose trace was judged

# --- HTTP (OpenTelemetry semantic conventions), set by the ASGI middleware --------------------
HTTP_ROUTE: Final = "http.route"
HTTP_REQUEST_METHOD: Final = "http.request.method"
HTTP_RESPONSE_STATUS_CODE: Final = "http.response.status_code"
URL_PATH: Final = "url.path"

# --- errors (OpenTelemetry semantic conventions): the "exception" event on a failed span ------
EXCEPTION_EVENT: Final = "exception"
EXCEPTION_TYPE: Final = "exception.type"
EXCEPTION_MESSAGE: Final = "exception.message"
EXCEPTION_STACKTRACE: Final = "exception.stacktrace"

# --- resource attributes ---------------------------------------------------------------------
SERVICE_NAME: Final = "service.name"
SERVICE_VERSION: Final = "service.version"  # the release being evaluated
DEPLOYMENT_ENVIRONMENT: Final = "deployment.environment.name"
TELEMETRY_SDK_NAME: Final = "telemetry.sdk.name"
TELEMETRY_SDK_LANGUAGE: Final = "telemetry.sdk.language"
TELEMETRY_SDK_VERSION: Final = "telemetry.sdk.version"


def document_attribute(prefix: str, index: int, field: str) -> str:
    """The flattened attribute name of one document field, e.g. ``retrieval.documents.0.document.id``."""
    return f"{prefix}.{index}.{field}"


#: Document list prefixes in the order of the pipeline.
DOCUMENT_PREFIXES: Final = (
    RETRIEVAL_DOCUMENTS,
    RERANKER_INPUT_DOCUMENTS,
    RERANKER_OUTPUT_DOCUMENTS,
    CONTEXT_DOCUMENTS,
)
