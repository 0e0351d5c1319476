"""Attribute values the sender's SDK cut short (``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT``).

A stock OpenTelemetry SDK cuts every string attribute value (and every string in an array value)
longer than ``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT`` (unlimited unless set) to that many characters, and
says nothing: no count, no flag. A value read as JSON (GenAI documents or messages, a chain's mapping
input or response object, run metadata) then no longer parses, so its documents, query or answer are
lost; a prompt read for the passages it shows loses those after the cut, so the context looks
shorter than the one the model saw. Read as if whole, either gives a complete-looking trace whose
labels are wrong. A value looks cut when:

- it should be JSON (it starts with ``{`` or ``[``) and is not: it does not end with ``}`` or ``]``,
  or its length is round (`round_length`) and it does not parse;
- it is a piece of an LLM span's prompt and its length is round: a cut value is exactly as long as
  the limit, and limits are set to round numbers (1000, 4096, 8192). The read model confirms it
  with the trace's passages (`ends_inside`: a prompt cut inside a passage ends with that passage's
  beginning), since a prompt of 2,000 characters may also just be one.

The collector records which attributes of a span look cut (`cut_attributes`, kept in
``spans.cut_attributes``, migration 0013) and tells the sender (`cut_message`); the read model
(`ragtrace_store.assembly`) makes a trace incomplete when a value it needs was cut.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from ragtrace import semconv as sc

__all__ = ["LIMIT_OPTION", "PROMPT_JSON_KEYS", "cut_attributes", "cut_json", "cut_message", "ends_inside",
           "prompt_piece", "round_length"]

#: the SDK option that cuts values, named in every reason and message
LIMIT_OPTION = "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT"
#: attributes read as JSON when they are strings
JSON_KEYS = (sc.GEN_AI_RETRIEVAL_DOCUMENTS, sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_OUTPUT_MESSAGES,
             sc.GEN_AI_SYSTEM_INSTRUCTIONS, sc.LLM_PROMPTS, sc.LLM_PROMPT_TEMPLATE_VARIABLES, sc.INPUT_VALUE,
             sc.OUTPUT_VALUE, sc.METADATA)
#: the JSON attributes an LLM span's prompt is read from (`ragtrace_store.assembly.prompt_texts`)
PROMPT_JSON_KEYS = (sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_SYSTEM_INSTRUCTIONS, sc.LLM_PROMPTS,
                    sc.LLM_PROMPT_TEMPLATE_VARIABLES)
#: how many characters of a passage's beginning a prompt must end with to be cut inside it: fewer
#: would match by chance (a prompt ending in "The " and a passage beginning with it)
_INSIDE_CHARS = 8


def round_length(n: int) -> bool:
    """Whether ``n`` characters is a length a limit is set to: a multiple of 100 or of 128 (1000,
    2000, 4096, 8192, ...), at least 100."""
    return n >= 100 and (n % 100 == 0 or n % 128 == 0)


def cut_json(value: str) -> bool:
    """Whether a value that should be JSON visibly is not: JSON-looking (``{`` or ``[`` first) and
    not ending as JSON does, or of a round length and not parsing."""
    text = value.strip()
    if text[:1] not in ("{", "["):
        return False
    if text[-1:] not in ("}", "]"):
        return True
    if not round_length(len(value)):
        return False
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return True
    return False


def prompt_piece(key: str) -> bool:
    """Whether ``key`` holds text of an LLM span's prompt (OpenInference input messages and prompts,
    the span's input): the values a round length makes suspect."""
    if key in (sc.INPUT_VALUE, sc.LLM_PROMPTS):
        return True
    for prefix in (sc.LLM_INPUT_MESSAGES + ".", sc.LLM_PROMPTS + "."):
        if key.startswith(prefix):
            return key.endswith(("." + sc.MESSAGE_CONTENT, ".message_content.text", ".prompt.text"))
    return False


def cut_attributes(attrs: Mapping[str, Any], kind: str) -> list[str]:
    """The attributes of one span whose values look cut: JSON values that are not JSON (any span),
    prompt pieces of a round length (LLM spans). A value that is an array counts when one of its
    strings does."""
    out = [key for key in JSON_KEYS if isinstance(v := attrs.get(key), str) and cut_json(v)]
    if kind == sc.SpanKind.LLM.value:
        for key, value in attrs.items():
            if key in out or not prompt_piece(key):
                continue
            texts = value if isinstance(value, list) else [value]
            if any(isinstance(t, str) and round_length(len(t)) for t in texts):
                out.append(key)
    return out


def cut_message(key: str, span_name: str, value: Any) -> str:
    """What the sender is told about one value that looks cut."""
    n = len(value) if isinstance(value, str) else max((len(t) for t in value if isinstance(t, str)), default=0)
    if key in JSON_KEYS and isinstance(value, str) and cut_json(value):
        return (f"{key} of span {span_name[:80]!r} is not valid JSON ({n} characters): it was cut, most likely by "
                f"the sending SDK's {LIMIT_OPTION}; raise it (a trace whose documents, prompt, query or answer "
                "arrive cut is read as incomplete)")
    return (f"{key} of span {span_name[:80]!r} has {n} characters, a round number: if that is the sending SDK's "
            f"{LIMIT_OPTION}, the prompt was cut; raise it (a trace whose prompt is cut inside a passage is read "
            "as incomplete)")


def _norm(text: str) -> str:
    return " ".join(text.split())


def ends_inside(value: str, passages: Iterable[str]) -> str | None:
    """The passage (of ``passages``) that ``value`` stops inside of: the value ends with a proper
    beginning of it, at least `_INSIDE_CHARS` characters long (compared with runs of whitespace
    made one space, as prompts are matched to passages); None when it ends inside none."""
    text = _norm(value)
    for passage in passages:
        whole = _norm(passage)
        if len(whole) <= _INSIDE_CHARS:
            continue
        head = whole[:_INSIDE_CHARS]
        pos = text.find(head, max(0, len(text) - len(whole) + 1))
        while pos >= 0:
            if whole.startswith(text[pos:]):  # the rest of the value is the passage's beginning
                return passage
            pos = text.find(head, pos + 1)
    return None
