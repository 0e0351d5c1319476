"""The entailment model's training material: licence gating, per-source quotas and the near-copy rules.

The rules are checked on sentences written here; the quotas on the real nli-train files (marked
shared_data: a user's clone does not have them).
"""

from __future__ import annotations

import random
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "training"))

from nli_data import (  # noqa: E402
    EPOCH_QUOTA,
    EXPERIMENT_ONLY,
    NOT_ENTAILMENT,
    SHIPPABLE,
    Pair,
    TrainingData,
    change_month,
    change_number,
    flip_negation,
    near_copies,
    swap_name,
)

NLI_DATA = ROOT.parent / "shared" / "data" / "nli-train"


def test_only_redistributable_commercial_sources_are_shippable() -> None:
    assert set(SHIPPABLE) == {"fever", "mnli", "snli"}
    assert set(EXPERIMENT_ONLY) == {"anli", "sick", "rte", "covidfact"}


def test_a_changed_number_or_month_differs_in_that_detail_only() -> None:
    rng = random.Random(1)
    text = "The bridge opened in March 1932 and carries 4,500 cars a day."
    for _ in range(20):
        changed = change_number(text, rng)
        assert changed is not None and changed != text
        assert changed.split()[:3] == text.split()[:3] and changed.endswith("cars a day.")
    month = change_month(text, rng)
    assert month is not None and "March" not in month and "1932" in month
    assert change_number("No digits here.", rng) is None and change_month("No month here.", rng) is None


def test_negation_is_added_or_removed() -> None:
    rng = random.Random(2)
    assert flip_negation("The library is open on weekdays.", rng) == "The library is not open on weekdays."
    assert flip_negation("The drug was not approved.", rng) == "The drug was approved."
    assert flip_negation("She didn't win the prize.", rng) == "She did win the prize."
    assert flip_negation("Birds fly south.", rng) is None


def test_a_swapped_name_comes_from_another_claim_and_is_absent_from_the_premise() -> None:
    rng = random.Random(3)
    out = swap_name("The film was directed by Ana Kowalczyk in Venice.", "Ana Kowalczyk directed it in Venice.",
                    ["It was built by the city of Rotterdam in spring.", "A song recorded by Lena Park."], rng)
    assert out is not None
    assert ("Ana Kowalczyk" in out) != ("Venice" in out)  # exactly one name replaced
    assert "Rotterdam" in out or "Lena Park" in out


def test_near_copies_pair_a_copy_with_its_changed_copy() -> None:
    seeds = [Pair("The tower was completed in 1889 and is 330 metres tall. It stands in Paris.",
                  "The tower is 330 metres tall.", "entailment", "fever"),
             Pair("The library was not open on Sundays in 1990. It was built by Mary Jones.",
                  "The library was built by Mary Jones.", "entailment", "mnli")]
    out = near_copies(seeds, 40, random.Random(4))
    assert len(out) == 40
    copies, changed = out[0::2], out[1::2]
    assert all(c.label == "entailment" and c.source.startswith("near-copy:") for c in copies)
    for c, d in zip(copies, changed, strict=True):
        assert d.premise == c.premise and d.hypothesis != c.hypothesis
        assert d.label == (NOT_ENTAILMENT if d.source.startswith("near-copy-name") else "contradiction")


@pytest.mark.shared_data
def test_an_epoch_keeps_its_quotas_and_is_the_same_for_the_same_seed() -> None:
    if not NLI_DATA.exists():
        pytest.skip(f"reference data not present at {NLI_DATA} (only in the development checkout)")
    data = TrainingData(NLI_DATA, SHIPPABLE, seed=13)
    first = data.epoch(0)
    assert [(p.premise, p.label) for p in first[:50]] == [(p.premise, p.label) for p in data.epoch(0)[:50]]
    counts = Counter((p.source, p.label) for p in first if not p.source.startswith("near-copy"))
    for source, quota in EPOCH_QUOTA.items():
        if source in SHIPPABLE:
            for label, n in quota.items():
                assert counts[(source, label)] == n
    # FEVER rotates: the next epoch draws other FEVER pairs
    fever0 = {p.hypothesis for p in first if p.source == "fever"}
    fever1 = {p.hypothesis for p in data.epoch(1) if p.source == "fever"}
    assert len(fever0 & fever1) < 0.2 * len(fever0)
    assert all(m["shippable"] == "true" and len(m["sha256"]) == 64 for m in data.manifest())


@pytest.mark.shared_data
def test_a_second_stage_scales_one_source_without_touching_the_others_balance() -> None:
    if not NLI_DATA.exists():
        pytest.skip(f"reference data not present at {NLI_DATA} (only in the development checkout)")
    data = TrainingData(NLI_DATA, SHIPPABLE, seed=13, scale={"fever": 0.25, "mnli": 1.5, "near-copies": 0.4})
    counts = Counter((p.source, p.label) for p in data.epoch(0) if not p.source.startswith("near-copy"))
    assert counts[("fever", "entailment")] == counts[("fever", "contradiction")] == 3500
    # a quota above the pool repeats it: every MultiNLI pair once, half of them twice
    assert counts[("mnli", "entailment")] == round(6709 * 1.5)
    assert counts[("snli", "neutral")] == EPOCH_QUOTA["snli"]["neutral"]
    near = sum(p.source.startswith("near-copy") for p in data.epoch(0))
    assert 0 < near <= round(11000 * 0.4)
    with pytest.raises(ValueError, match="cannot scale"):
        TrainingData(NLI_DATA, SHIPPABLE, scale={"feverr": 2.0})
