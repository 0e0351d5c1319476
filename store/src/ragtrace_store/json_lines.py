"""The one JSON Lines reader: every input file of one JSON value per line (label records, harness
records, evidence spans, reference answers) is read here, and its errors take one form:
``PATH:N: what is wrong; what each line must be``.

Lines are split at ``\\n`` (and ``\\r\\n``) only: a JSON string may hold U+2028 or U+0085 unescaped
(label records are written with ``ensure_ascii=False``), which `str.splitlines` would break a line at.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ragtrace_store.errors import not_utf8

__all__ = ["json_line_values"]


def json_line_values(path: str | Path, error: type[Exception], shape: str) -> Iterator[tuple[str, Any]]:
    """``(where, value)`` for each non-blank line of ``path``, ``where`` being ``"PATH:N"`` (N from 1),
    the prefix every error about that line starts with.

    A file that is not UTF-8, or a line that is not JSON, raises ``error`` with a message that names the
    file (and line) and ends with ``shape``, the form each line must take. The whole file is decoded
    before the first value is yielded, so an undecodable file is reported as such, not as a bad line.
    A file that cannot be opened raises `OSError` as `open` does.
    """
    with open(path, encoding="utf-8", newline="") as fh:
        try:
            text = fh.read()
        except UnicodeDecodeError as exc:
            raise error(not_utf8(path, exc)) from None
    for n, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise error(f"{where}: not valid JSON ({exc.msg} at column {exc.colno}); {shape}") from None
        yield where, value
