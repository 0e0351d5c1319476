"""``@pipeline``, ``@retriever``, ``@reranker``, ``@generator``.

Each works with and without parentheses on plain functions, ``async def``, generators and async
generators (methods too: a leading ``self``/``cls`` is skipped when counting positions).

What is read from a call (references only; shapes are read on the export thread):

=========== ======================================= ==========================================
stage       input                                   output
=========== ======================================= ==========================================
pipeline    ``query=`` or the first ``str`` argument;  the return value (answer); a returned
            ``query_id=`` and ``gold_ids=`` kwargs    generator is the streamed answer
retriever   ``query=`` or the first ``str`` argument   the returned documents (or yielded ones)
reranker    ``documents=`` or the second positional    the returned documents, reordered;
            argument; ``top_k=``/``k=``/``top_n=``     ``top_k`` defaults to their number
generator   ``context=``/``documents=`` or the second  the answer, returned or yielded in chunks
            positional argument; the prompt is
            ``prompt=`` or the first ``str`` argument
=========== ======================================= ==========================================

A user exception is re-raised unchanged after the span is marked as an error. A stream closed
early records the chunks sent so far. ``send()``/``throw()`` are not forwarded into a wrapped
generator's inner generator (streams of answers do not use them).
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Iterator, Sequence
from typing import Any, Final, TypeVar, cast, overload

from ragtrace import _runtime as rt
from ragtrace._documents import Adapter, capture
from ragtrace._explicit import gold_id_list
from ragtrace._runtime import GENERATOR, PIPELINE, RERANKER, RETRIEVER, SpanRecord, log_once

F = TypeVar("F", bound=Callable[..., Any])

_DOC_KWARGS: Final = ("documents", "docs", "candidates", "passages", "nodes")
_CONTEXT_KWARGS: Final = ("context", "documents", "docs", "passages", "contexts")
_TOP_K_KWARGS: Final = ("top_k", "k", "top_n", "n")
_PROMPT_KWARGS: Final = ("prompt", "query", "question")


class _Options:
    __slots__ = ("adapter", "model", "name", "offset", "stage")

    def __init__(self, stage: int, name: str, offset: int, adapter: Adapter | None, model: str | None) -> None:
        self.stage = stage
        self.name = name
        self.offset = offset
        self.adapter = adapter
        self.model = model


def _self_offset(func: Callable[..., Any]) -> int:
    try:
        params = list(inspect.signature(func).parameters)
    except (TypeError, ValueError):
        return 0
    return 1 if params and params[0] in ("self", "cls") else 0


def _first_str(args: Sequence[Any]) -> str | None:
    for arg in args:
        if isinstance(arg, str):
            return arg
    return None


def _kwarg(kwargs: dict[str, Any], names: tuple[str, ...]) -> Any:
    for name in names:
        value = kwargs.get(name)
        if value is not None:
            return value
    return None


def _docs_arg(args: Sequence[Any], kwargs: dict[str, Any], names: tuple[str, ...], offset: int) -> Any:
    value = _kwarg(kwargs, names)
    if value is not None:
        return value
    if len(args) > offset + 1 and isinstance(args[offset + 1], list | tuple):
        return args[offset + 1]
    for arg in args[offset:]:  # documents passed first, query by keyword
        if isinstance(arg, list | tuple):
            return arg
    return None


def _capture_call(rec: SpanRecord, opts: _Options, args: Sequence[Any], kwargs: dict[str, Any]) -> None:
    stage = opts.stage
    rec.adapter = opts.adapter
    rec.model = opts.model
    if stage == PIPELINE:
        query = kwargs.get("query")
        rec.input = query if query is not None else kwargs.get("question") or _first_str(args)
        query_id = kwargs.get("query_id")
        if query_id is not None:
            rec.query_id = query_id
        gold = kwargs.get("gold_ids")
        if gold is not None:
            rec.gold_ids = gold_id_list(gold)
    elif stage == RETRIEVER:
        query = kwargs.get("query")
        rec.input = query if query is not None else kwargs.get("question") or _first_str(args)
    elif stage == RERANKER:
        query = kwargs.get("query")
        rec.input = query if query is not None else kwargs.get("question") or _first_str(args)
        rec.input_documents = capture(_docs_arg(args, kwargs, _DOC_KWARGS, opts.offset))
        top_k = _kwarg(kwargs, _TOP_K_KWARGS)
        if isinstance(top_k, int) and not isinstance(top_k, bool):
            rec.top_k = top_k
    else:  # GENERATOR
        rec.documents = capture(_docs_arg(args, kwargs, _CONTEXT_KWARGS, opts.offset))
        prompt = _kwarg(kwargs, _PROMPT_KWARGS)
        rec.input = prompt if prompt is not None else _first_str(args)


def _begin(opts: _Options, args: Sequence[Any], kwargs: dict[str, Any]) -> SpanRecord | None:
    rec = rt.start(opts.stage, opts.name)
    if rec is not None and rec.sampled:
        try:
            _capture_call(rec, opts, args, kwargs)
        except Exception:
            log_once("capture", "ragtrace: could not read the arguments of %s", opts.name, exc_info=True)
    return rec


def _record_items(rec: SpanRecord, items: list[Any]) -> None:
    """What a finished stream produced: documents for retrievers/rerankers, answer chunks else."""
    rec.streamed = True
    if rec.stage in (RETRIEVER, RERANKER):
        rec.documents = items
        rec.streamed = False
    else:
        rec.chunks = items


def _complete(rec: SpanRecord, result: Any) -> Any:
    """Record a returned value and close the span. Never raises; always gives back ``result``
    (or, for a returned generator, a wrapper that closes the span when the stream ends)."""
    try:
        # A returned stream keeps the span open (sampled or not, so stages inside it agree).
        if isinstance(result, types.GeneratorType):
            return _stream(rec, result)
        if isinstance(result, types.AsyncGeneratorType):
            return _astream(rec, result)
        if rec.sampled:
            if rec.stage in (RETRIEVER, RERANKER):
                rec.documents = capture(result)
            else:
                rec.output = result
    except Exception:
        log_once("complete", "ragtrace: could not record the result of %s", rec.name, exc_info=True)
    rt.finish(rec)
    return result


def _stream(rec: SpanRecord, gen: Iterator[Any]) -> Generator[Any, None, Any]:
    """Re-yield a generator, with the span current only while the inner generator runs."""
    items: list[Any] = []
    try:
        while True:
            rt.activate(rec)
            try:
                item = next(gen)
            except StopIteration as stop:
                return stop.value
            finally:
                rt.deactivate(rec)
            items.append(item)
            yield item
    except GeneratorExit as exc:  # the consumer stopped early
        rec.error = exc
        close = getattr(gen, "close", None)
        if close is not None:
            close()
        raise
    except BaseException as exc:
        rec.error = exc
        raise
    finally:
        try:
            _record_items(rec, items)
        finally:
            rt.finish(rec)


async def _astream(rec: SpanRecord, agen: AsyncIterator[Any]) -> AsyncGenerator[Any, None]:
    items: list[Any] = []
    try:
        while True:
            rt.activate(rec)
            try:
                item = await agen.__anext__()
            except StopAsyncIteration:
                return
            finally:
                rt.deactivate(rec)
            items.append(item)
            yield item
    except GeneratorExit as exc:
        rec.error = exc
        aclose = getattr(agen, "aclose", None)
        if aclose is not None:
            await aclose()
        raise
    except BaseException as exc:
        rec.error = exc
        raise
    finally:
        try:
            _record_items(rec, items)
        finally:
            rt.finish(rec)


def _wrap(func: F, opts: _Options) -> F:
    if inspect.isasyncgenfunction(func):

        @functools.wraps(func)
        async def agen_wrapper(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
            rec = _begin(opts, args, kwargs)
            inner: AsyncGenerator[Any, None]
            if rec is None:
                inner = func(*args, **kwargs)
            else:
                try:
                    created = func(*args, **kwargs)
                finally:
                    rt.deactivate(rec)
                inner = _astream(rec, created)
            try:
                async for item in inner:
                    yield item
            finally:
                await inner.aclose()

        return cast(F, agen_wrapper)

    if inspect.isgeneratorfunction(func):

        @functools.wraps(func)
        def gen_wrapper(*args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
            rec = _begin(opts, args, kwargs)
            if rec is None:
                return (yield from func(*args, **kwargs))
            try:
                created = func(*args, **kwargs)
            except BaseException as exc:
                rec.error = exc
                rt.end(rec)
                raise
            rt.deactivate(rec)
            return (yield from _stream(rec, created))

        return cast(F, gen_wrapper)

    if inspect.iscoroutinefunction(func):

        @functools.wraps(func)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            if rt._runtime is None:
                return await func(*args, **kwargs)
            rec = _begin(opts, args, kwargs)
            if rec is None:
                return await func(*args, **kwargs)
            try:
                result = await func(*args, **kwargs)
            except BaseException as exc:
                rec.error = exc
                rt.end(rec)
                raise
            rt.deactivate(rec)
            return _complete(rec, result)

        return cast(F, async_wrapper)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if rt._runtime is None:  # unconfigured: one global lookup, nothing else
            return func(*args, **kwargs)
        rec = _begin(opts, args, kwargs)
        if rec is None:
            return func(*args, **kwargs)
        try:
            result = func(*args, **kwargs)
        except BaseException as exc:
            rec.error = exc
            rt.end(rec)
            raise
        rt.deactivate(rec)
        return _complete(rec, result)

    return cast(F, wrapper)


def _decorator(stage: int, func: F | None, name: str | None, adapter: Adapter | None,
               model: str | None) -> F | Callable[[F], F]:
    def decorate(target: F) -> F:
        if not callable(target):
            raise TypeError(f"ragtrace decorators apply to functions, not {type(target).__name__}")
        span_name = str(name or getattr(target, "__qualname__", None) or getattr(target, "__name__", "stage"))
        return _wrap(target, _Options(stage, span_name, _self_offset(target), adapter, model))

    if func is not None:
        return decorate(func)
    return decorate


@overload
def pipeline(func: F, /) -> F: ...
@overload
def pipeline(*, name: str | None = None) -> Callable[[F], F]: ...
def pipeline(func: F | None = None, /, *, name: str | None = None) -> F | Callable[[F], F]:
    """Root span of one query (``CHAIN``): the query in, the answer out.

    The query is ``query=`` or the first ``str`` argument; ``query_id=`` and ``gold_ids=`` keyword
    arguments, when the function takes them, are recorded too (or call ``ragtrace.set_query_id``).
    """
    return _decorator(PIPELINE, func, name, None, None)


@overload
def retriever(func: F, /) -> F: ...
@overload
def retriever(*, name: str | None = None, adapter: Adapter | None = None) -> Callable[[F], F]: ...
def retriever(func: F | None = None, /, *, name: str | None = None,
              adapter: Adapter | None = None) -> F | Callable[[F], F]:
    """Retrieval span (``RETRIEVER``): records the returned documents with their ranks."""
    return _decorator(RETRIEVER, func, name, adapter, None)


@overload
def reranker(func: F, /) -> F: ...
@overload
def reranker(*, name: str | None = None, adapter: Adapter | None = None,
             model: str | None = None) -> Callable[[F], F]: ...
def reranker(func: F | None = None, /, *, name: str | None = None, adapter: Adapter | None = None,
             model: str | None = None) -> F | Callable[[F], F]:
    """Rerank span (``RERANKER``): documents in (second argument) and out (return value)."""
    return _decorator(RERANKER, func, name, adapter, model)


@overload
def generator(func: F, /) -> F: ...
@overload
def generator(*, name: str | None = None, adapter: Adapter | None = None,
              model: str | None = None) -> Callable[[F], F]: ...
def generator(func: F | None = None, /, *, name: str | None = None, adapter: Adapter | None = None,
              model: str | None = None) -> F | Callable[[F], F]:
    """Generation span (``LLM``): the supplied context documents, in order, and the answer."""
    return _decorator(GENERATOR, func, name, adapter, model)
