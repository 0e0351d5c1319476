"""Attribute values as the rows store them: text columns take any value, JSON-encoded unless a string.

A span's attributes reach Python as JSON-able values (the compiled walk turns an OTLP AnyValue into
str, int, float, bool, list, dict or None; bytes as hex, a non-finite double as its text).
"""

from __future__ import annotations

from typing import Any

import orjson


def value_text(value: Any) -> str:
    """A value as text: a string as it is, anything else as compact JSON. The compiled walk calls
    this for document ids, hashes, metadata and contents sent as other types than string."""
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def text_of(value: Any) -> str:
    """An attribute's value for a text column: `value_text`, and "" for an absent one (None)."""
    if value is None:
        return ""
    return value if isinstance(value, str) else orjson.dumps(value).decode()  # value_text, inline: hot
