"""Small helpers shared by the SDK tests."""

from __future__ import annotations

import hashlib
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

import ragtrace
from ragtrace import semconv as sc

#: What every span carries in content mode "full", and what a query root carries on top.
FULL = {sc.CONTENT_MODE: "full"}
ROOT = {sc.CONTENT_MODE: "full", sc.SDK_VERSION: ragtrace.__version__}


def short(name: str) -> str:
    """A span's name without the qualname path (``f.<locals>.g`` -> ``g``)."""
    return name.rsplit(".", 1)[-1]


def by_name(spans: list[ReadableSpan]) -> dict[str, ReadableSpan]:
    names = [short(s.name) for s in spans]
    assert len(names) == len(set(names)), f"span names not unique: {names}"
    return {short(s.name): s for s in spans}


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def doc_attrs(prefix: str, docs: list[dict[str, Any]], *, content: bool = True) -> dict[str, Any]:
    """The flattened attributes ragtrace must write for ``docs`` ({id, text[, score]})."""
    out: dict[str, Any] = {}
    for i, d in enumerate(docs):
        out[sc.document_attribute(prefix, i, sc.DOCUMENT_ID)] = d["id"]
        if "score" in d:
            out[sc.document_attribute(prefix, i, sc.DOCUMENT_SCORE)] = float(d["score"])
        if content:
            out[sc.document_attribute(prefix, i, sc.DOCUMENT_CONTENT)] = d["text"]
        out[sc.document_attribute(prefix, i, sc.DOCUMENT_CONTENT_HASH)] = sha(d["text"])
    return out


def docs(n: int, prefix: str = "d") -> list[dict[str, Any]]:
    return [{"id": f"{prefix}{i}", "text": f"passage {i} about {prefix}", "score": round(1 - i / 100, 2)}
            for i in range(n)]
