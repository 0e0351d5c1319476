"""The support-weight calibration's synthetic data: no evaluation set is read, no model is needed."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.grounding_calibration import lm_synthetic, synthesise


def _question(qid: str) -> dict[str, object]:
    gold = [
        {"id": f"{qid}-g1", "title": "Eiffel Tower", "is_supporting": True,
         "paragraph_text": "The Eiffel Tower was completed in March 1889 in Paris. It is 330 metres tall and "
                           "was designed by the company of Gustave Eiffel for the World's Fair."},
        {"id": f"{qid}-g2", "title": "Paris", "is_supporting": True,
         "paragraph_text": "Paris is the capital of France. It had about 2.1 million residents in 2020 "
                           "according to the national statistics office."},
    ]
    other = [{"id": f"{qid}-d{i}", "title": f"Other {i}", "is_supporting": False,
              "paragraph_text": f"Lake Baikal number {i} is the deepest lake in Siberia and holds about "
                                f"a fifth of the unfrozen fresh water on Earth's surface."} for i in range(4)]
    return {"question_id": qid, "contexts": gold + other}


def _hotpot(tmp_path: Path) -> Path:
    path = tmp_path / "hotpot.jsonl"
    path.write_text("".join(json.dumps(_question(f"q{i}")) + "\n" for i in range(3)))
    return path


def test_synthetic_claims_have_both_labels_and_keep_the_donor_out_of_the_evidence(tmp_path: Path) -> None:
    rows = synthesise(_hotpot(tmp_path), seed=7)
    kinds = {kind for *_, kind in rows}
    assert {"exact", "number", "added_detail", "distractor_sentence"} <= kinds
    for claim, passages, label, kind in rows:
        assert label in (0, 1) and len(passages) == 4
        if kind == "exact":
            assert any(claim in p.text for p in passages)


def test_lm_rows_come_from_the_cache_as_not_supported_claims(tmp_path: Path) -> None:
    cache = tmp_path / "lm.jsonl"
    cache.write_text("\n".join(json.dumps(r) for r in [
        {"kind": "closed_book", "question_id": "q0", "title": "Eiffel Tower",
         "text": "The Eiffel Tower was built by Napoleon in 1750 as a royal palace. It is painted gold every"},
        {"kind": "chat", "question_id": "q1", "title": "Eiffel Tower",
         "text": "Oh wow, I love it! I visited the tower with my grandmother last summer."},
    ]) + "\n")
    rows = lm_synthetic(_hotpot(tmp_path), seed=7, cache=cache, generate=False)
    assert [(c, label, kind) for c, _, label, kind in rows] == [
        # the cut-off second sentence is dropped; the chat reply's filler sentence makes no claim
        ("The Eiffel Tower was built by Napoleon in 1750 as a royal palace.", 0, "lm_closed_book"),
        ("I visited the tower with my grandmother last summer.", 0, "lm_chat"),
    ]
    assert all(len(p) == 4 for _, p, _, _ in rows)
