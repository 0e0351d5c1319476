"""Document attributes: which span attributes are a document's fields, and what a span says about them.

OpenInference lists a span's documents as attributes ``<prefix>.<rank>.document.<field>``
(``retrieval.documents.3.document.id``); the prefix names the stage (retrieved, reranker input,
reranked, context). The compiled walk (`ragtrace_collector.native_walk`, ``collector/native/otlp_walk.cc``)
reads them and makes every ``documents`` and ``passages`` row; it is configured from the names and
limits here, which come from `ragtrace.semconv` and the store's stage names (one source).
"""

from __future__ import annotations

from typing import Any

from ragtrace import semconv as sc
from ragtrace_collector.values import text_of
from ragtrace_store.records import STAGE_CONTEXT, STAGE_RERANK_INPUT, STAGE_RERANKED, STAGE_RETRIEVED

#: Ranks beyond this are refused (kept only in the raw span): ranks are UInt32 and no service
#: hands a reranker ten million candidates. Below 2^24: the walk packs (stage, rank) into one int.
MAX_RANK = 10_000_000
#: The stage of each attribute prefix, in the walk's stage order.
STAGE_OF_PREFIX = {
    sc.RETRIEVAL_DOCUMENTS: STAGE_RETRIEVED,
    sc.RERANKER_INPUT_DOCUMENTS: STAGE_RERANK_INPUT,
    sc.RERANKER_OUTPUT_DOCUMENTS: STAGE_RERANKED,
    sc.CONTEXT_DOCUMENTS: STAGE_CONTEXT,
}
STAGES = tuple(STAGE_OF_PREFIX.values())
#: A document's fields, in the order of the walk's field codes (id, score, content, metadata, hash).
FIELDS = (sc.DOCUMENT_ID, sc.DOCUMENT_SCORE, sc.DOCUMENT_CONTENT, sc.DOCUMENT_METADATA, sc.DOCUMENT_CONTENT_HASH)
#: The stage whose rows carry the reranker's ``top_k``.
TOP_K_STAGE = STAGE_RERANKED
#: The stage of GenAI document lists (``gen_ai.retrieval.documents``, `ragtrace_collector.interop`).
GEN_AI_STAGE = STAGE_RETRIEVED

#: One document of a GenAI list, as the walk takes it: (id, "" when none; score or None; content
#: or None; metadata as text or None). Its rank is its index in the list.
GenAiDocument = tuple[str, float | None, str | None, str | None]
#: One span whose documents the walk is to make rows of: (its ordinal in the parsed request, or a
#: GenAI document list; trace id; span id (hex); start time (ms); the reranker's top_k or None;
#: whether its passages may be truncated prefixes).
DocumentSpan = tuple[int | list[GenAiDocument], str, str, int, int | None, bool]


def document_options(other: dict[str, Any]) -> tuple[int | None, bool]:
    """What a span's other attributes say about its documents: the reranker's top_k (valid or
    None), and whether passages may be truncated prefixes. Under the SDK's "truncate:N" mode a
    passage is a prefix exactly when its text no longer hashes to the full text's hash, sent along;
    such a prefix cannot be checked against that hash and is stored under its own."""
    top_k = other.get(sc.RERANKER_TOP_K)
    valid = isinstance(top_k, int) and not isinstance(top_k, bool) and 0 <= top_k <= MAX_RANK
    return (top_k if valid else None), text_of(other.get(sc.CONTENT_MODE)).startswith("truncate")
