"""JSON Lines input files read the way every importer reports them: ``FILE line N`` and what to fix."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ragtrace_store.errors import not_utf8


def json_line_values(path: str | Path, error: type[Exception], shape: str) -> Iterator[tuple[str, Any]]:
    """``(where, value)`` for each non-blank line of ``path``, ``where`` being ``"PATH line N"``.

    A file that is not UTF-8, or a line that is not JSON, raises ``error`` with a message that names the
    file (and line) and ends with ``shape``, the form each line must take. The whole file is decoded
    before the first value is yielded, so an undecodable file is reported as such, not as a bad line.
    """
    with open(path, encoding="utf-8") as fh:
        try:
            lines = list(enumerate(fh, 1))
        except UnicodeDecodeError as exc:
            raise error(not_utf8(path, exc)) from None
    for n, line in lines:
        if not line.strip():
            continue
        where = f"{path} line {n}"
        try:
            value = json.loads(line)
        except ValueError as exc:
            raise error(f"{where}: not valid JSON ({exc}); {shape}") from None
        yield where, value
