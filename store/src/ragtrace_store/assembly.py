"""How one query is read from its spans: candidate pool, final order, supplied context, query, answer,
and whether the trace is complete enough to be labelled at all.

The ragtrace SDK records each of these explicitly. Other clients do not (OpenInference's LangChain
and LlamaIndex instrumentors, hand-written OpenTelemetry spans in any language), so the same
question is answered from what they do send, by rules that depend on the trace tree and on text,
never on timing. Each rule is in docs/wire.md with the client that needs it:

- **pool** (``retrieved``): the documents of the innermost retrievers, i.e. retriever spans with
  documents and no retriever below them. One such retriever: its list. Several (an ensemble, a
  query-fusion retriever, a retry): their union, interleaved by rank, deduplicated by id. A
  retriever that wraps others (LangChain's compression retriever, LlamaIndex's ``retrieve`` around
  ``_retrieve``) re-orders or filters what they found, so its list is a *ranking*, not the pool:
  gold found by the base retriever and dropped by the compressor is a rank inversion, not a
  retrieval gap.
- **order** (``reranked``): the output of the last reranker (the one whose output no other
  reranker takes as input), else the outermost wrapping retriever's list; else, when the context
  read from the prompt is not the pool's head (a step that records no documents re-ordered or
  filtered it), that context followed by the rest of the pool in retrieval order; else none.
- **context**: ``ragtrace.context.documents`` when recorded; else the documents whose text the
  generation prompts contain, in prompt order (LangChain and LlamaIndex format the passages into the
  prompt verbatim); else the guesses the SDK-less protocol allows (``reranked[:top_k]``,
  ``reranked``, ``retrieved``). Generation spans are the LLM spans outside any retriever or
  reranker (an LLM that reranks or compresses is not the generator); for the context only the
  innermost of nested LLM spans count (LlamaIndex's ``predict`` around ``complete``).
- **query**: the root's ``input.value``, unless that is empty or a JSON object (LangChain chains take
  ``{"question": ..., "user": ...}``): then the configured input keys (``RAGTRACE_QUERY_INPUT_KEYS``),
  then the outermost retriever's input, then ``reranker.query``, then the usual keys.
- **answer**: the root's ``output.value``, unless it is not the answer text: empty, a generator's
  ``repr`` (LlamaIndex ``streaming=True``), a JSON object (a response object): then an answer key
  of that object, else the last generation span's output.
- **complete**: a trace is incomplete when a span lost attributes (``dropped_attributes_count``:
  a stock OpenTelemetry SDK keeps 128 per span and drops the rest silently), when a value it was read
  from arrived cut (``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT``, `ragtrace_store.cut_values`: JSON that does
  not parse, a prompt of a round length that stops inside a passage), when a document list
  has holes in its indices, or when a stage is missing (a reranker with input documents and no
  output, a span whose parent never arrived, an SDK pipeline with no stage, a streamed answer that
  no generation span recorded, a recorded context naming a document no retrieval or rerank span
  holds). Its labels would be guesses, so the audit reports it as its own
  outcome instead.

The ragtrace SDK's own roots (``ragtrace.sdk.version``) are trusted for query and answer: the SDK
records both as text.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from ragtrace import semconv as sc
from ragtrace_store.cut_values import LIMIT_OPTION, PROMPT_JSON_KEYS, cut_json, ends_inside, prompt_piece
from ragtrace_store.records import STAGE_CONTEXT, STAGE_RERANK_INPUT, STAGE_RERANKED, STAGE_RETRIEVED, DocumentRef

__all__ = [
    "DEFAULT_QUERY_KEYS",
    "ENV_QUERY_INPUT_KEYS",
    "GENERATION_KINDS",
    "INCOMPLETE_CUT",
    "INCOMPLETE_DROPPED",
    "INCOMPLETE_HOLES",
    "INCOMPLETE_MISSING",
    "METADATA_SCORE_KEYS",
    "STAGE_KINDS",
    "Assembled",
    "SpanNode",
    "StageList",
    "assemble_query",
    "document_id_from_metadata",
    "document_score_from_metadata",
    "llm_output_text",
    "prompt_texts",
    "query_input_keys",
]

#: Span kinds that make a trace a query when they sit under its root.
STAGE_KINDS: tuple[str, ...] = (sc.SpanKind.RETRIEVER.value, sc.SpanKind.RERANKER.value, sc.SpanKind.LLM.value)
GENERATION_KINDS: tuple[str, ...] = (sc.SpanKind.LLM.value,)
#: ``RAGTRACE_QUERY_INPUT_KEYS``: comma-separated keys of a mapping root input that hold the query,
#: tried before the retriever's input (e.g. ``question`` for a chain invoked with
#: ``{"question": ..., "user": ...}``).
ENV_QUERY_INPUT_KEYS = "RAGTRACE_QUERY_INPUT_KEYS"
#: keys tried after the retriever's input and ``reranker.query``
DEFAULT_QUERY_KEYS: tuple[str, ...] = ("query", "question", "input", "query_str")
#: keys of a mapping root output (a response object) that hold the answer
_ANSWER_KEYS = ("answer", "response", "output", "result", "text", "content")

#: reason codes of `TraceRecord.incomplete_reasons` (each reason is ``"<code>: <detail>"``)
INCOMPLETE_DROPPED = "dropped_attributes"
INCOMPLETE_HOLES = "document_holes"
INCOMPLETE_MISSING = "missing_stage"
INCOMPLETE_CUT = "cut_value"

# A value that is an object's repr, not text: "<generator object ...>", "<... object at 0x7f...>".
_REPR = re.compile(r"<(?:async_)?generator object\b|\bobject at 0x[0-9a-fA-F]+>")
#: a passage longer than this also counts as shown when only its first characters are in the prompt
#: (LlamaIndex's compact synthesizer may split a long passage across two LLM calls)
_PREFIX_CHARS = 200


def query_input_keys() -> tuple[str, ...]:
    """``RAGTRACE_QUERY_INPUT_KEYS`` as a tuple (empty when unset)."""
    raw = os.environ.get(ENV_QUERY_INPUT_KEYS, "")
    return tuple(k.strip() for k in raw.split(",") if k.strip())


@dataclass(frozen=True)
class SpanNode:
    """One span of a trace as the read model sees it. ``start``/``end`` only order siblings when
    nothing else can; ``attributes`` is None when they were not read."""

    span_id: str
    parent_id: str
    kind: str
    name: str
    start: Any
    end: Any
    dropped_attributes: int = 0
    attributes: Mapping[str, Any] | None = None
    #: attributes whose values arrived looking cut (`ragtrace_store.cut_values`)
    cut_attributes: tuple[str, ...] = ()


@dataclass(frozen=True)
class StageList:
    """The documents one span recorded at one stage, in rank order."""

    span_id: str
    start: Any
    docs: tuple[DocumentRef, ...]
    top_k: int | None = None


@dataclass(frozen=True)
class Assembled:
    """What `assemble_query` decided about one trace."""

    query: str
    answer: str | None
    retrieved: tuple[DocumentRef, ...]
    reranked: tuple[DocumentRef, ...]
    context: tuple[DocumentRef, ...]
    context_source: str
    incomplete_reasons: tuple[str, ...] = ()
    #: whether the trace has a retriever, reranker or LLM span besides its root
    has_stage: bool = False
    notes: tuple[str, ...] = field(default=(), compare=False)


# --- the tree ------------------------------------------------------------------------------------
class _Tree:
    def __init__(self, spans: Mapping[str, SpanNode]) -> None:
        self.spans = spans
        self._ancestors: dict[str, tuple[str, ...]] = {}

    def ancestors(self, span_id: str) -> tuple[str, ...]:
        """Ids from the parent upwards, stopping at a missing span (its id is the last entry) or a
        cycle (a malformed trace must not loop)."""
        cached = self._ancestors.get(span_id)
        if cached is not None:
            return cached
        out: list[str] = []
        seen = {span_id}
        node = self.spans.get(span_id)
        while node is not None and node.parent_id and node.parent_id not in seen:
            out.append(node.parent_id)
            seen.add(node.parent_id)
            node = self.spans.get(node.parent_id)
        result = tuple(out)
        self._ancestors[span_id] = result
        return result

    def kind(self, span_id: str) -> str:
        node = self.spans.get(span_id)
        return node.kind if node is not None else ""

    def order_key(self, span_id: str) -> tuple[Any, ...]:
        node = self.spans.get(span_id)
        return (0, node.start, node.end, span_id) if node is not None else (1, None, None, span_id)


def _sort_key(value: Any) -> Any:
    # datetimes and None must sort together: None (unknown) last
    return (value is None, value)


def _ordered(tree: _Tree, ids: Iterable[str]) -> list[str]:
    def key(span_id: str) -> tuple[Any, ...]:
        missing, start, end, sid = tree.order_key(span_id)
        return (missing, _sort_key(start), _sort_key(end), sid)

    return sorted(ids, key=key)


# --- documents -------------------------------------------------------------------------------------
def document_id_from_metadata(doc_id: str, metadata: str) -> str:
    """A document's id: the sent ``document.id``, else an ``id`` / ``doc_id`` / ``document_id`` string
    in its metadata JSON (OpenInference's LangChain instrumentor does not export ``Document.id``,
    so ``Document(metadata={"id": ...})`` is how LangChain users name their documents), else the
    content-hash stand-in the collector gave it."""
    if not doc_id.startswith("sha256:") or not metadata or not metadata.startswith("{"):
        return doc_id
    try:
        meta = orjson.loads(metadata)
    except orjson.JSONDecodeError:
        return doc_id
    if isinstance(meta, dict):
        for key in ("id", "doc_id", "document_id"):
            value = meta.get(key)
            if isinstance(value, str | int) and not isinstance(value, bool) and str(value):
                return str(value)
    return doc_id


#: keys of a document's metadata that hold its score when none was sent: LangChain retrievers put
#: their similarity there (``Document.metadata["score"]``), its rerankers and compressors their
#: ``relevance_score``
METADATA_SCORE_KEYS = ("score", "relevance_score")


def document_score_from_metadata(score: float | None, metadata: str) -> float | None:
    """A document's score: the sent ``document.score``, else a finite number under a
    `METADATA_SCORE_KEYS` key of its metadata JSON (OpenInference's LangChain instrumentor exports a
    ``Document``'s metadata and no score of its own), else None."""
    if score is not None or not metadata or not metadata.startswith("{"):
        return score
    try:
        meta = orjson.loads(metadata)
    except orjson.JSONDecodeError:
        return None
    if isinstance(meta, dict):
        for key in METADATA_SCORE_KEYS:
            value = meta.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
                return float(value)
    return None


def _interleave(lists: Sequence[Sequence[DocumentRef]]) -> tuple[DocumentRef, ...]:
    """The union of several rankings, rank 0 of each first, deduplicated by id, re-ranked from 0."""
    out: list[DocumentRef] = []
    seen: set[str] = set()
    for i in range(max((len(x) for x in lists), default=0)):
        for docs in lists:
            if i < len(docs) and docs[i].id not in seen:
                seen.add(docs[i].id)
                out.append(replace(docs[i], rank=len(out)))
    return tuple(out)


def _holes(lists: Iterable[tuple[str, StageList]], tree: _Tree) -> list[str]:
    out = []
    for stage, sl in lists:
        ranks = sorted(d.rank for d in sl.docs)
        if ranks != list(range(len(ranks))):
            node = tree.spans.get(sl.span_id)
            name = node.name if node is not None else sl.span_id
            missing = (ranks[-1] + 1 - len(set(ranks))) if ranks else 0
            out.append(f"{INCOMPLETE_HOLES}: span {name!r} has {len(ranks)} {stage} documents at ranks "
                       f"{ranks[0]}..{ranks[-1]} ({missing} missing): attributes were lost on the way")
    return out


# --- text of LLM spans -------------------------------------------------------------------------------
def _strings(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        if value:
            out.append(value)
    elif isinstance(value, Mapping):
        for v in value.values():
            _strings(v, out)
    elif isinstance(value, list | tuple):
        for v in value:
            _strings(v, out)


def _json_or_text(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def _indexed(attrs: Mapping[str, Any], prefix: str, suffixes: tuple[str, ...]) -> list[tuple[int, int, str]]:
    """``prefix.{i}.<suffix>`` string values (and ``prefix.{i}.message.contents.{j}...`` ones) as
    (i, j, text), for flattened OpenInference lists."""
    out = []
    start = prefix + "."
    for key, value in attrs.items():
        if not key.startswith(start) or not isinstance(value, str):
            continue
        index, _, rest = key[len(start):].partition(".")
        if not index.isdigit():
            continue
        if rest in suffixes:
            out.append((int(index), -1, value))
        elif rest.startswith("message.contents.") and rest.endswith(".message_content.text"):
            j = rest[len("message.contents."):].partition(".")[0]
            if j.isdigit():
                out.append((int(index), int(j), value))
    return sorted(out)


def prompt_texts(attrs: Mapping[str, Any]) -> list[str]:
    """The prompt an LLM span was given, as text pieces in prompt order: OpenInference input
    messages and prompts, GenAI input messages and system instructions; when a span has none of
    those, its ``input.value`` (JSON strings decoded) and then its prompt template variables."""
    pieces = [t for _, _, t in _indexed(attrs, sc.LLM_INPUT_MESSAGES, (sc.MESSAGE_CONTENT,))]
    prompts = attrs.get(sc.LLM_PROMPTS)
    if prompts is not None:
        _strings(_json_or_text(prompts), pieces)
    pieces += [t for _, _, t in _indexed(attrs, sc.LLM_PROMPTS, ("prompt.text",))]
    for key in (sc.GEN_AI_SYSTEM_INSTRUCTIONS, sc.GEN_AI_INPUT_MESSAGES):
        if key in attrs:
            _strings(_json_or_text(attrs[key]), pieces)
    if pieces:
        return pieces
    for key in (sc.INPUT_VALUE, sc.LLM_PROMPT_TEMPLATE_VARIABLES):
        if key in attrs:
            _strings(_json_or_text(attrs[key]), pieces)
        if pieces:
            break
    return pieces


def llm_output_text(attrs: Mapping[str, Any]) -> str | None:
    """The text an LLM span produced: its last output message, GenAI output messages, or an
    ``output.value`` that is text (a LangChain ``LLMResult`` JSON gives its first generation)."""
    messages = _indexed(attrs, sc.LLM_OUTPUT_MESSAGES, (sc.MESSAGE_CONTENT,))
    if messages:
        last = messages[-1][0]
        return "".join(t for i, _, t in messages if i == last)
    if sc.GEN_AI_OUTPUT_MESSAGES in attrs:
        parts: list[str] = []
        _strings(_gen_ai_text_parts(_json_or_text(attrs[sc.GEN_AI_OUTPUT_MESSAGES])), parts)
        if parts:
            return "".join(parts)
    value = attrs.get(sc.OUTPUT_VALUE)
    if not isinstance(value, str) or not value:
        return None
    parsed = _json_or_text(value)
    if isinstance(parsed, Mapping):
        gens = parsed.get("generations")
        if isinstance(gens, list) and gens and isinstance(gens[0], list) and gens[0]:
            first = gens[0][0]
            if isinstance(first, Mapping) and isinstance(first.get("text"), str):
                return str(first["text"])
        return _answer_in(parsed)
    if isinstance(parsed, list):
        return None
    return None if _REPR.search(value) else value


def _gen_ai_text_parts(messages: Any) -> Any:
    """The ``content`` of the text parts of GenAI messages (``[{role, parts: [{type, content}]}]``)."""
    out: list[Any] = []
    for msg in messages if isinstance(messages, list) else [messages]:
        parts = msg.get("parts") if isinstance(msg, Mapping) else None
        for part in parts if isinstance(parts, list) else []:
            if isinstance(part, Mapping) and part.get("type", "text") == "text":
                out.append(part.get("content"))
    return out


def _answer_in(obj: Mapping[str, Any]) -> str | None:
    for key in _ANSWER_KEYS:
        value = obj.get(key)
        if isinstance(value, str) and value and not _REPR.search(value):
            return value
    return None


def _root_answer(answer: str | None) -> tuple[str | None, bool]:
    """(the root's output as the answer, or None; whether the root claimed an output at all)."""
    if answer is None or not answer.strip():
        return None, False
    parsed = _json_or_text(answer)
    if isinstance(parsed, Mapping):
        return _answer_in(parsed), True
    if isinstance(parsed, list) or _REPR.search(answer):
        return None, True
    return answer, True


# --- context from the prompt -------------------------------------------------------------------------
def _norm(text: str) -> str:
    return " ".join(text.split())


def _recover_context(prompts: Sequence[Sequence[str]], candidates: Sequence[DocumentRef]) -> tuple[DocumentRef, ...]:
    """The candidates whose text the prompts contain, in prompt order (prompts in call order).

    Longer passages are placed first and their text masked, so a passage that is a substring of
    another (``doc 1`` in ``doc 10``) is found only where it stands on its own.
    """
    texts = ["\n".join(_norm(p) for p in pieces) for pieces in prompts]
    by_text: dict[str, list[DocumentRef]] = {}
    for d in candidates:
        if d.content:
            by_text.setdefault(_norm(d.content), []).append(d)
    found: list[tuple[int, int, int, DocumentRef]] = []
    for text in sorted((t for t in by_text if t), key=len, reverse=True):
        hit = None
        for needle in (text, text[:_PREFIX_CHARS] if len(text) > _PREFIX_CHARS else None):
            if needle is None:
                continue
            for call, prompt in enumerate(texts):
                pos = prompt.find(needle)
                if pos >= 0:
                    hit = (call, pos, len(needle))
                    break
            if hit is not None:
                break
        if hit is None:
            continue
        call, pos, n = hit
        texts[call] = texts[call][:pos] + "\0" * n + texts[call][pos + n:]
        for d in by_text[text]:
            found.append((call, pos, d.rank, d))
    found.sort(key=lambda f: (f[0], f[1], f[2]))
    out: list[DocumentRef] = []
    seen: set[str] = set()
    for *_, d in found:
        if d.id not in seen:
            seen.add(d.id)
            out.append(replace(d, rank=len(out)))
    return tuple(out)


def _cut_reasons(spans: Mapping[str, SpanNode], needed: set[tuple[str, str]], prompted: Sequence[str],
                 passages: Sequence[DocumentRef]) -> list[str]:
    """Why the trace is incomplete because a value it is read from arrived cut: a needed value
    whose JSON does not parse; a prompt (of the generation spans the context was read from) of a
    round length that stops inside one of the trace's passages."""
    out = []
    for span_id, node in sorted(spans.items()):
        attrs = node.attributes or {}
        for key in node.cut_attributes:
            value = attrs.get(key)
            where = f"span {node.name!r} ({node.kind or 'no kind'}): {key}"
            fix = f"raise {LIMIT_OPTION} in the service that sent it"
            json_cut = isinstance(value, str) and cut_json(value)
            if span_id in prompted and prompt_piece(key) and not json_cut:
                # text of the prompt: cut only if it stops inside a passage
                texts = value if isinstance(value, list) else [value]
                inside = next((d for t in texts if isinstance(t, str)
                               for d in passages if d.content and ends_inside(t, [d.content])), None)
                if inside is not None:
                    out.append(f"{INCOMPLETE_CUT}: {where} stops inside the passage {inside.id!r} (cut at "
                               f"{max(len(t) for t in texts if isinstance(t, str))} characters): the context read "
                               f"from the prompt may lack what came after; {fix}")
            elif (json_cut or value is None) and ((span_id, key) in needed or (span_id in prompted and (
                    key in PROMPT_JSON_KEYS or (key == sc.INPUT_VALUE and not _other_prompt(attrs))))):
                # (not read: the collector named it for JSON that does not parse)
                out.append(f"{INCOMPLETE_CUT}: {where} arrived cut (its JSON does not parse): what the trace "
                           f"reads from it is lost; {fix}")
    return out


def _other_prompt(attrs: Mapping[str, Any]) -> bool:
    """Whether an LLM span's prompt is read from something else than its ``input.value``
    (`prompt_texts` reads that only when the span has none of these)."""
    return any(k.startswith((sc.LLM_INPUT_MESSAGES + ".", sc.LLM_PROMPTS + ".")) or k in PROMPT_JSON_KEYS
               for k in attrs)


# --- the query -------------------------------------------------------------------------------------
def _text_query(value: Any) -> str | None:
    """A retriever input as query text: a plain string, or the query inside a JSON input."""
    if not isinstance(value, str) or not value.strip():
        return None
    parsed = _json_or_text(value)
    if isinstance(parsed, Mapping):
        return _key_query(parsed, DEFAULT_QUERY_KEYS)
    if isinstance(parsed, list):
        return None
    return value


def _key_query(obj: Mapping[str, Any], keys: Sequence[str]) -> str | None:
    for key in keys:
        value = obj.get(key)
        if isinstance(value, str) and value.strip():
            return value
        if isinstance(value, Mapping):  # LlamaIndex: {"query_bundle": {"query_str": ...}}
            inner = _key_query(value, keys)
            if inner:
                return inner
    for value in obj.values():
        if isinstance(value, Mapping) and "query_str" in value and isinstance(value["query_str"], str):
            return str(value["query_str"])
    return None


# --- assembly ------------------------------------------------------------------------------------------
def assemble_query(
    *,
    root_span_id: str,
    sdk_root: bool,
    query: str,
    answer: str | None,
    spans: Mapping[str, SpanNode],
    stages: Mapping[str, Sequence[StageList]],
    query_keys: Sequence[str] = (),
) -> Assembled:
    """Decide pool, order, context, query, answer and completeness of one trace (module docstring).

    ``stages`` maps each stage name to the lists recorded at it; documents carry their content when
    the caller has it (context recovery needs it). ``spans`` need ``attributes`` for LLM and
    retriever spans when the context, the query or the answer is to be read from them.
    """
    tree = _Tree(spans)
    reasons: list[str] = []
    # (span, attribute) pairs this trace is read from, for the values that arrived cut
    needed: set[tuple[str, str]] = {(s, sc.GEN_AI_RETRIEVAL_DOCUMENTS) for s in spans}
    if not sdk_root:  # the root's input, output and metadata give its query, answer and query id
        needed.update((root_span_id, key) for key in (sc.INPUT_VALUE, sc.OUTPUT_VALUE, sc.METADATA))

    # pool and wrapping retrievers, by the tree
    retrievers = {sl.span_id: sl for sl in stages.get(STAGE_RETRIEVED, ())}
    with_docs = set(retrievers)
    leaves = [r for r in with_docs if not any(r in tree.ancestors(o) for o in with_docs if o != r)]
    wrappers = [r for r in with_docs if r not in leaves]
    leaf_lists = [retrievers[r].docs for r in _ordered(tree, leaves)]
    retrieved = leaf_lists[0] if len(leaf_lists) == 1 else _interleave(leaf_lists)
    outer_wrappers = [w for w in wrappers if not any(a in wrappers for a in tree.ancestors(w))]

    # the final reranker: the one whose output no other reranker takes as input
    rerank_out = {sl.span_id: sl for sl in stages.get(STAGE_RERANKED, ())}
    rerank_in = {sl.span_id: sl for sl in stages.get(STAGE_RERANK_INPUT, ())}
    finals = [s for s in rerank_out
              if not any([d.id for d in rerank_in[o].docs] == [d.id for d in rerank_out[s].docs]
                         for o in rerank_in if o != s)]
    final = _ordered(tree, finals or list(rerank_out))
    top_k: int | None = None
    if final:
        chosen = rerank_out[final[-1]]
        reranked, top_k = chosen.docs, chosen.top_k
    elif outer_wrappers:
        reranked = retrievers[_ordered(tree, outer_wrappers)[-1]].docs
    else:
        reranked = ()
    for span_id in rerank_in:
        if span_id not in rerank_out and rerank_in[span_id].docs:
            name = spans[span_id].name if span_id in spans else span_id
            reasons.append(f"{INCOMPLETE_MISSING}: reranker {name!r} has {len(rerank_in[span_id].docs)} input "
                           "documents and no output documents")

    # generation spans: LLM spans outside any retriever or reranker
    def outside_stages(span_id: str) -> bool:
        return not any(tree.kind(a) in (sc.SpanKind.RETRIEVER.value, sc.SpanKind.RERANKER.value)
                       for a in tree.ancestors(span_id))

    generations = _ordered(tree, (s for s, n in spans.items() if n.kind in GENERATION_KINDS and outside_stages(s)))
    innermost = [g for g in generations if not any(g in tree.ancestors(o) for o in generations if o != g)]

    # context
    recorded = list(stages.get(STAGE_CONTEXT, ()))
    candidates: list[DocumentRef] = []
    context: tuple[DocumentRef, ...]
    if recorded:
        context, source = recorded[-1].docs, "recorded"
    else:
        prompts = [prompt_texts(spans[g].attributes or {}) for g in innermost]
        prompts = [p for p in prompts if p]
        seen_ids: set[str] = set()
        candidates = []
        for docs in (reranked, retrieved, *(sl.docs for lists in stages.values() for sl in lists)):
            for d in docs:
                if d.id not in seen_ids:
                    seen_ids.add(d.id)
                    candidates.append(d)
        if prompts and any(d.content for d in candidates):
            context, source = _recover_context(prompts, candidates), "prompt"
            if not reranked and [d.id for d in context] != [d.id for d in retrieved[:len(context)]]:
                # Re-ordered or filtered between retrieval and prompt by a step that records no
                # documents (a LangChain lambda, a callback-style LlamaIndex postprocessor): the
                # final order is the prompt's, and what was not shown ranks below it.
                shown = {d.id for d in context}
                reranked = (*context, *(replace(d, rank=len(context) + i) for i, d in
                                        enumerate(d for d in retrieved if d.id not in shown)))
        elif reranked and top_k:
            context, source = reranked[:top_k], "reranker_top_k"
        elif reranked:
            context, source = reranked, "reranked"
        else:
            context, source = retrieved, "retrieved"

    # query
    text_query = query
    if not sdk_root and (not query.strip() or isinstance(_json_or_text(query), Mapping)):
        parsed = _json_or_text(query)
        mapping = parsed if isinstance(parsed, Mapping) else {}
        found = _key_query(mapping, query_keys) if query_keys else None
        if found is None:
            outer_retrievers = [s for s, n in spans.items() if n.kind == sc.SpanKind.RETRIEVER.value
                                and not any(tree.kind(a) == sc.SpanKind.RETRIEVER.value for a in tree.ancestors(s))]
            for s in _ordered(tree, outer_retrievers):
                attrs = spans[s].attributes or {}
                found = _text_query(attrs.get(sc.GEN_AI_RETRIEVAL_QUERY_TEXT)) or _text_query(attrs.get(sc.INPUT_VALUE))
                if found:
                    needed.add((s, sc.INPUT_VALUE))
                    break
        if found is None:
            for s in _ordered(tree, (s for s, n in spans.items() if n.kind == sc.SpanKind.RERANKER.value)):
                value = (spans[s].attributes or {}).get(sc.RERANKER_QUERY)
                if isinstance(value, str) and value.strip():
                    found = value
                    break
        if found is None and mapping:
            found = _key_query(mapping, DEFAULT_QUERY_KEYS)
        text_query = found if found is not None else query

    # answer
    final_answer: str | None
    if sdk_root:
        final_answer, claimed = answer, answer is not None
    else:
        final_answer, claimed = _root_answer(answer)
    if final_answer is None:
        by_end = sorted(generations, key=lambda g: (_sort_key(spans[g].end), _sort_key(spans[g].start), g))
        for g in reversed(by_end):
            text = llm_output_text(spans[g].attributes or {})
            if text:
                final_answer = text
                needed.update((g, key) for key in (sc.GEN_AI_OUTPUT_MESSAGES, sc.OUTPUT_VALUE))
                break
        if final_answer is None and claimed:
            reasons.append(f"{INCOMPLETE_MISSING}: the root's output is not the answer text (a stream or a "
                           "response object) and no generation span recorded an output")

    # completeness
    has_stage = any(n.kind in STAGE_KINDS and n.span_id != root_span_id for n in spans.values())
    relevant = [n for n in spans.values() if n.span_id == root_span_id or n.kind in STAGE_KINDS]
    for n in sorted(relevant, key=lambda n: n.span_id):
        if n.dropped_attributes > 0:
            reasons.append(f"{INCOMPLETE_DROPPED}: span {n.name!r} ({n.kind or 'no kind'}) lost "
                           f"{n.dropped_attributes} attributes (dropped_attributes_count); raise "
                           "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT in the service that sent it")
    reasons += _holes(((stage, sl) for stage, lists in stages.items() for sl in lists), tree)
    prompted = innermost if source == "prompt" else []
    reasons += _cut_reasons(spans, needed, prompted, candidates if prompted else [])
    if source == "recorded":
        # A recorded context names what the generator was given; every such document came through a
        # retrieval or rerank span of the trace. One that none holds means that span did not arrive
        # (an export that failed, a span refused): P would be read as C, and the labels guessed.
        held = {d.id for lists in (stages.get(STAGE_RETRIEVED, ()), stages.get(STAGE_RERANK_INPUT, ()),
                                   stages.get(STAGE_RERANKED, ())) for sl in lists for d in sl.docs}
        unheld = list(dict.fromkeys(d.id for d in context if d.id not in held))
        if unheld:
            node = spans.get(recorded[-1].span_id)
            name = node.name if node is not None else recorded[-1].span_id
            named = ", ".join(repr(i) for i in unheld[:3]) + (f" and {len(unheld) - 3} more" if len(unheld) > 3 else "")
            reasons.append(f"{INCOMPLETE_MISSING}: the context of span {name!r} names {len(unheld)} of its "
                           f"{len(context)} documents ({named}) that no retrieval or rerank span of this trace "
                           "holds: the span that retrieved them has not arrived (or they were supplied from "
                           "elsewhere; record that step as a retriever)")
    if sdk_root and not has_stage and not any(stages.values()):
        reasons.append(f"{INCOMPLETE_MISSING}: no retrieval, rerank or generation span of this pipeline has "
                       "arrived")
    root_chain = tree.ancestors(root_span_id)
    upstream = root_chain[-1] if root_chain and root_chain[-1] not in spans else None
    for n in sorted(spans.values(), key=lambda n: n.span_id):
        if n.kind not in STAGE_KINDS or n.span_id == root_span_id:
            continue
        chain = tree.ancestors(n.span_id)
        if root_span_id in chain or not chain:
            continue
        if chain[-1] not in spans and chain[-1] != upstream:
            reasons.append(f"{INCOMPLETE_MISSING}: span {n.name!r} ({n.kind}) has a parent span that never "
                           "arrived")
    return Assembled(query=text_query, answer=final_answer, retrieved=tuple(retrieved), reranked=tuple(reranked),
                     context=tuple(context), context_source=source,
                     incomplete_reasons=tuple(dict.fromkeys(reasons)), has_stage=has_stage)
