"""Values cut by the sender's OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT (`ragtrace_store.cut_values`): what looks
cut, and which cut values make a trace incomplete in the read model (`ragtrace_store.assembly`): the ones
it is read from, a prompt only when it stops inside a passage."""

from __future__ import annotations

import json

import pytest

from ragtrace import semconv as sc
from ragtrace_store.assembly import SpanNode, StageList, assemble_query
from ragtrace_store.cut_values import cut_attributes, cut_json, ends_inside, round_length
from ragtrace_store.records import STAGE_CONTEXT, STAGE_RETRIEVED, DocumentRef

PASSAGES = {"a": "Water boils at 100 degrees Celsius at sea level.",
            "b": "Salt water boils at a slightly higher temperature than fresh water.",
            "c": "Ice is less dense than liquid water, so it floats."}


@pytest.mark.parametrize(("n", "expected"), [(100, True), (128, True), (300, True), (1000, True), (4096, True),
                                             (8192, True), (99, False), (150, False), (4095, False), (64, False)])
def test_round_lengths(n: int, expected: bool) -> None:
    assert round_length(n) is expected


def test_json_that_does_not_parse_looks_cut() -> None:
    whole = json.dumps([{"id": str(i), "content": "x" * 30} for i in range(20)])
    assert not cut_json(whole) and not cut_json("plain text, not JSON") and not cut_json("{}")
    assert cut_json(whole[:333])  # stops mid-token: not even the last character is JSON's
    # stops right after an inner object, so it ends as JSON does: at a round length it is parsed
    obj = '{"id": "x", "c": "' + "y" * 79 + '"}'
    listed = "[" + ",".join([obj] * 6) + "]"
    assert len(obj) == 99 and listed[:400].endswith("}") and cut_json(listed[:400])
    odd = "[" + ",".join([obj[:-4] + '"}'] * 6) + "]"  # objects of 97: the third ends at 294
    assert odd[:294].endswith("}") and not cut_json(odd[:294])  # not a round length: the cheap check only


def test_a_value_is_cut_inside_a_passage_when_it_ends_with_its_beginning() -> None:
    prompt = "Use these:\n\n" + PASSAGES["a"] + "\n\n" + PASSAGES["b"]
    assert ends_inside(prompt[:-10], PASSAGES.values()) == PASSAGES["b"]
    assert ends_inside(prompt, PASSAGES.values()) is None  # every passage whole
    assert ends_inside(prompt[:prompt.index(PASSAGES["b"]) + 5], PASSAGES.values()) is None  # 5 characters: chance
    # runs of whitespace count as one space, as when prompts are matched to passages
    assert ends_inside(prompt.replace("\n\n", "\n \t ")[:-10], PASSAGES.values()) == PASSAGES["b"]


def test_the_collector_names_json_anywhere_and_round_prompts_of_llm_spans() -> None:
    cut = json.dumps([{"id": "a", "content": PASSAGES["a"]}] * 9)[:300]
    prompt = ("p" * 299) + "."
    assert cut_attributes({sc.GEN_AI_RETRIEVAL_DOCUMENTS: cut, sc.INPUT_VALUE: "q"}, "RETRIEVER") == [
        sc.GEN_AI_RETRIEVAL_DOCUMENTS]
    assert cut_attributes({"llm.input_messages.0.message.content": prompt, sc.LLM_PROMPTS: ["x" * 200],
                           "llm.input_messages.0.message.role": "s" * 300}, "LLM") == [
        "llm.input_messages.0.message.content", sc.LLM_PROMPTS]
    assert cut_attributes({"llm.input_messages.0.message.content": prompt}, "CHAIN") == []


def _docs() -> tuple[DocumentRef, ...]:
    return tuple(DocumentRef(id=k, rank=i, score=None, content_hash=f"h{k}", content=v)
                 for i, (k, v) in enumerate(PASSAGES.items()))


def _read(prompt: str, *, recorded: bool = False) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(context ids, incomplete reasons) of a chain whose LLM span was given ``prompt``, which the
    collector named as looking cut."""
    key = "llm.input_messages.0.message.content"
    spans = {"root": SpanNode("root", "", "CHAIN", "chain", 0, 9),
             "ret": SpanNode("ret", "root", "RETRIEVER", "retrieve", 1, 2),
             "llm": SpanNode("llm", "root", "LLM", "chat", 3, 4, attributes={key: prompt}, cut_attributes=(key,))}
    stages = {STAGE_RETRIEVED: [StageList("ret", 1, _docs())]}
    if recorded:
        stages[STAGE_CONTEXT] = [StageList("llm", 3, _docs()[:2])]
    got = assemble_query(root_span_id="root", sdk_root=recorded, query="q", answer="a", spans=spans, stages=stages)
    return tuple(d.id for d in got.context), got.incomplete_reasons


def test_a_round_prompt_is_cut_only_when_it_stops_inside_a_passage() -> None:
    shown = ("Use these passages to answer the question below, and nothing else:\n\n" + PASSAGES["a"] + "\n\n"
             + PASSAGES["b"])
    cut = (shown + "\n\n" + PASSAGES["c"])[:200]
    assert len(cut) == 200 and PASSAGES["c"][:10] in cut
    context, reasons = _read(cut)
    assert context == ("a", "b") and len(reasons) == 1
    assert reasons[0].startswith("cut_value: span 'chat' (LLM): llm.input_messages.0.message.content stops inside "
                                 "the passage 'c' (cut at 200 characters)")
    assert "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT" in reasons[0]
    # a prompt of a round length that ends where a passage ends was not cut inside one
    whole = shown + " " * (200 - len(shown))
    assert len(whole) == 200 and _read(whole) == (("a", "b"), ())
    # a recorded context (the SDK's) is not read from the prompt: its length does not matter
    assert _read(cut, recorded=True) == (("a", "b"), ())
