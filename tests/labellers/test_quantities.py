"""The date normaliser: the formats people write, their readings, and the agreement rule."""

from __future__ import annotations

import pytest

from ragtrace_evaluator.labellers.quantities import date_supported, find_dates


@pytest.mark.parametrize(("text", "readings"), [
    ("released on 2003.06.11 in Japan", {(2003, 6, 11)}),
    ("released on 2003-06-11", {(2003, 6, 11)}),
    ("released on 11 June 2003", {(2003, 6, 11)}),
    ("released on the 11th of June, 2003", {(2003, 6, 11)}),
    ("released on June 11, 2003", {(2003, 6, 11)}),
    ("released in June 2003", {(2003, 6, None)}),
    ("released on Jun. 11", {(None, 6, 11)}),
    ("released on 25/12/1999", {(1999, 12, 25)}),
    # day/month or month/day: both readings are kept
    ("released on 03/06/2003", {(2003, 3, 6), (2003, 6, 3)}),
    # lower-cased text still has dates; "may" the verb is not a month
    ("released in may 2003", {(2003, 5, None)}),
])
def test_formats(text: str, readings: set[tuple[int | None, int | None, int | None]]) -> None:
    dates = find_dates(text)
    assert len(dates) == 1 and set(dates[0].readings) == readings
    assert text[dates[0].start:dates[0].end].strip(" .")  # the span is the date's own text


@pytest.mark.parametrize("text", ["in 1889", "it may 11 be", "he scored 3 of 10"])
def test_no_date(text: str) -> None:
    assert find_dates(text) == []


def test_a_claim_date_needs_every_part_it_states() -> None:
    evidence = find_dates("The two-page note, addressed to Mrs Ellis and dated 19 August 1945, finds him dealing "
                          "with the subject of joy.")  # fib_dev, xsum_30531079 (grounding-train)
    for claim, supported in (("dated 19 August 1945", True), ("dated 1945-08-19", True), ("in August 1945", True),
                             ("on August 19", True), ("dated 20 August 1945", False), ("in August 1946", False),
                             ("in September 1945", False)):
        (date,) = find_dates(claim)
        assert date_supported(date, evidence) is supported, claim
    # a month and year in the evidence do not support a claim's day
    (day,) = find_dates("dated 19 August 1945")
    assert not date_supported(day, find_dates("in August 1945"))
