"""The explicit API, for code that cannot be decorated, and setters for the current query.

    with ragtrace.trace_query(question, query_id="q-17") as q:
        hits = index.search(question)
        q.retrieved(hits)
        top = cross_encoder.rerank(question, hits)[:5]
        q.reranked(top, top_k=5)            # input documents default to the retrieved ones
        answer = llm.complete(prompt(question, top))
        q.generated(answer, context=top)    # one LLM span; also the query's answer

Each recorded stage becomes a span that starts where the previous stage (or the query) ended and
ends when it is recorded, so durations are right when stages are recorded as they finish.
Decorated functions called inside the ``with`` block nest under the query span as usual.

Nothing here raises into the caller: misuse is logged (once a minute) and ignored.
"""

from __future__ import annotations

from collections.abc import Iterable
from types import TracebackType
from typing import Any

from ragtrace import _runtime as rt
from ragtrace._documents import Adapter
from ragtrace._runtime import GENERATOR, PIPELINE, RERANKER, RETRIEVER, SpanRecord, log_once


def gold_id_list(values: object) -> list[str]:
    """Gold ids as strings. One id given alone (``"doc-9"``, ``17``) is one id: a string is not
    read as the sequence of its characters."""
    if isinstance(values, bytes):
        return [values.decode("utf-8", "replace")]
    if isinstance(values, str) or not isinstance(values, Iterable):
        return [str(values)]
    return [str(v) for v in values]


class QueryTrace:
    """One query, recorded stage by stage. Use as a (sync or async) context manager."""

    def __init__(self, query: str | None = None, *, query_id: str | None = None,
                 gold_ids: Iterable[Any] | None = None, name: str = "query",
                 adapter: Adapter | None = None) -> None:
        self._query = query
        self._query_id = query_id
        self._gold = gold_ids
        self._name = name
        self._adapter = adapter
        self._rec: SpanRecord | None = None
        self._last_ns = 0
        self._retrieved: list[Any] | None = None
        self._context: list[Any] | None = None
        self._answered = False

    # --- context manager ---------------------------------------------------------------------

    def __enter__(self) -> QueryTrace:
        rec = rt.start(PIPELINE, self._name)
        self._rec = rec
        if rec is not None:
            self._last_ns = rec.start_ns
            if rec.sampled:
                try:
                    rec.input = self._query
                    if self._query_id is not None:
                        rec.query_id = str(self._query_id)
                    if self._gold is not None:
                        rec.gold_ids = gold_id_list(self._gold)
                except Exception:
                    log_once("explicit", "ragtrace: bad trace_query arguments", exc_info=True)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        rec = self._rec
        if rec is not None:
            if exc is not None:
                rec.error = exc
            rt.end(rec)

    async def __aenter__(self) -> QueryTrace:
        return self.__enter__()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.__exit__(exc_type, exc, tb)

    # --- identity ----------------------------------------------------------------------------

    @property
    def trace_id(self) -> str | None:
        """32 hex digits, or None when the SDK is not configured."""
        return format(self._rec.trace_id, "032x") if self._rec is not None else None

    @property
    def recording(self) -> bool:
        """True when this query is configured and sampled in."""
        return self._rec is not None and self._rec.sampled

    def _live(self) -> SpanRecord | None:
        rec = self._rec
        if rec is None or not rec.sampled:
            return None
        if rec.end_ns:
            log_once("explicit-ended", "ragtrace: a stage was recorded after trace_query() ended; ignored")
            return None
        return rec

    def _stage(self, stage: int, name: str, adapter: Adapter | None) -> SpanRecord | None:
        root = self._live()
        if root is None:
            return None
        child = rt.child_record(root, stage, name, self._last_ns)
        child.adapter = adapter or self._adapter
        return child

    def _done(self, child: SpanRecord) -> None:
        rt.finish(child)
        self._last_ns = child.end_ns

    # --- stages ------------------------------------------------------------------------------

    def retrieved(self, documents: Iterable[Any], *, query: str | None = None, name: str = "retrieve",
                  adapter: Adapter | None = None) -> None:
        """A RETRIEVER span with ``documents`` in rank order."""
        try:
            child = self._stage(RETRIEVER, name, adapter)
            if child is None:
                return
            child.input = query if query is not None else self._query
            child.documents = list(documents)
            self._retrieved = child.documents
            self._done(child)
        except Exception:
            log_once("explicit", "ragtrace: could not record retrieved documents", exc_info=True)

    def reranked(self, documents: Iterable[Any], *, input_documents: Iterable[Any] | None = None,
                 query: str | None = None, top_k: int | None = None, model: str | None = None,
                 name: str = "rerank", adapter: Adapter | None = None) -> None:
        """A RERANKER span: ``input_documents`` (default: the retrieved ones) -> ``documents``."""
        try:
            child = self._stage(RERANKER, name, adapter)
            if child is None:
                return
            child.input = query if query is not None else self._query
            child.input_documents = (list(input_documents) if input_documents is not None
                                     else self._retrieved)
            child.documents = list(documents)
            child.top_k = top_k
            child.model = model
            self._done(child)
        except Exception:
            log_once("explicit", "ragtrace: could not record reranked documents", exc_info=True)

    def supplied(self, documents: Iterable[Any]) -> None:
        """The context handed to the generator, in order (used by the next ``generated``)."""
        try:
            self._context = list(documents)
        except Exception:
            log_once("explicit", "ragtrace: could not record supplied context", exc_info=True)

    def generated(self, answer: Any, *, context: Iterable[Any] | None = None, prompt: str | None = None,
                  model: str | None = None, name: str = "generate", adapter: Adapter | None = None) -> None:
        """An LLM span with its context documents (default: the last ``supplied``) and answer.
        The answer is also the query's answer unless ``answer()`` sets one."""
        try:
            child = self._stage(GENERATOR, name, adapter)
            if child is None:
                return
            child.documents = list(context) if context is not None else self._context
            child.input = prompt if prompt is not None else self._query
            child.output = answer
            child.model = model
            self._done(child)
            root = self._rec
            if root is not None and not self._answered:
                root.output = answer
        except Exception:
            log_once("explicit", "ragtrace: could not record a generation", exc_info=True)

    def answer(self, answer: Any) -> None:
        """The query's final answer (root span ``output.value``)."""
        root = self._live()
        if root is not None:
            root.output = answer
            self._answered = True

    def gold(self, ids: Iterable[Any]) -> None:
        """Known-relevant document ids for this query."""
        root = self._live()
        if root is not None:
            try:
                root.gold_ids = gold_id_list(ids)
            except Exception:
                log_once("explicit", "ragtrace: gold ids must be an iterable of ids", exc_info=True)

    def set_query_id(self, query_id: str) -> None:
        root = self._live()
        if root is not None:
            root.query_id = str(query_id)

    def set_attribute(self, key: str, value: Any) -> None:
        """An extra attribute on the query span."""
        root = self._live()
        if root is not None:
            if root.attributes is None:
                root.attributes = {}
            root.attributes[str(key)] = value


def trace_query(query: str | None = None, *, query_id: str | None = None,
                gold_ids: Iterable[Any] | None = None, name: str = "query",
                adapter: Adapter | None = None) -> QueryTrace:
    """Trace one query without decorators; see ``QueryTrace``."""
    return QueryTrace(query, query_id=query_id, gold_ids=gold_ids, name=name, adapter=adapter)


# --- setters for the query being traced (decorators or explicit API) ---------------------------


def set_query_id(query_id: str) -> bool:
    """Set ``ragtrace.query.id`` on the current query's root span. False outside a recorded query."""
    root = rt.current_root()
    if root is None:
        return False
    root.query_id = str(query_id)
    return True


def set_gold_ids(ids: Iterable[Any]) -> bool:
    """Set ``ragtrace.gold.document_ids`` on the current query's root span."""
    root = rt.current_root()
    if root is None:
        return False
    try:
        root.gold_ids = gold_id_list(ids)
    except Exception:
        log_once("explicit", "ragtrace: gold ids must be an iterable of ids", exc_info=True)
        return False
    return True


def set_attribute(key: str, value: Any) -> bool:
    """An extra attribute on the current ragtrace span (str, bool, int, float or a list of str)."""
    cur = rt.current()
    if cur is None or not cur.sampled:
        return False
    if cur.attributes is None:
        cur.attributes = {}
    cur.attributes[str(key)] = value
    return True


def current_trace_id() -> str | None:
    """The current trace id (32 hex digits), to return to clients; None outside a trace."""
    try:
        return rt.current_trace_id()
    except Exception:
        return None
