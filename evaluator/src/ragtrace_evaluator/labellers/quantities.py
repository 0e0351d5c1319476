"""Dates as people write them, normalised so a claim's date can be checked against its evidence.

"2003.06.11", "2003-06-11", "11/06/2003", "11 June 2003", "11th of June, 2003", "June 11, 2003",
"June 2003" and "Jun. 11" all name a (year, month, day) with some parts left out. A claim's date is
supported by an evidence date that agrees on every part the claim states: "June 2003" is supported
by "11 June 2003", while "11 June 2003" is not supported by "June 2003" (the day is the claim's own)
nor by "12 June 2003". An all-numeric date whose first two fields could be either day/month or
month/day ("03/06/2003") keeps both readings; any reading may match.

Bare years and bare month names are not dates here: the lexical features count them as years and
months (see :mod:`ragtrace_evaluator.labellers.lexical`), where the same agreement rule applies.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

#: (year, month, day); None where the text leaves the part out
Reading = tuple[int | None, int | None, int | None]

MONTH_NUMBERS = {
    name: i + 1 for i, names in enumerate(
        [("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",),
         ("june", "jun"), ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"),
         ("october", "oct"), ("november", "nov"), ("december", "dec")]
    ) for name in names
}
MONTH_NAMES = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
               "october", "november", "december")

_MONTH = r"(?P<{}>" + "|".join(sorted(MONTH_NUMBERS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<{}>[12]\d|3[01]|0?[1-9])(?:st|nd|rd|th)?"
_YEAR = r"(?P<{}>1\d{{3}}|20\d{{2}})"
_SEP = r"[-./]"

# Longest forms first: a match consumes its span, so "June 11, 2003" is not also read as "June 2003".
_PATTERNS = [
    # 2003.06.11, 2003-06-11, 2003/6/11
    re.compile(rf"\b{_YEAR.format('y')}{_SEP}(?P<m>0?[1-9]|1[0-2]){_SEP}(?P<d>[12]\d|3[01]|0?[1-9])\b"),
    # 11.06.2003, 06/11/2003 (day/month or month/day: both readings kept when both are valid)
    re.compile(rf"\b(?P<a>\d{{1,2}}){_SEP}(?P<b>\d{{1,2}}){_SEP}{_YEAR.format('y')}\b"),
    # 11 June 2003, 11th of June, 2003
    re.compile(rf"\b{_DAY.format('d')}(?:\s+of)?\s+{_MONTH.format('m')},?\s+{_YEAR.format('y')}\b", re.IGNORECASE),
    # June 11, 2003 / June 11th 2003
    re.compile(rf"\b{_MONTH.format('m')}\s+{_DAY.format('d')},?\s+{_YEAR.format('y')}\b", re.IGNORECASE),
    # June 2003, June of 2003, June, 2003
    re.compile(rf"\b{_MONTH.format('m')},?\s+(?:of\s+)?{_YEAR.format('y')}\b", re.IGNORECASE),
    # 11 June, 11th of June
    re.compile(rf"\b{_DAY.format('d')}(?:\s+of)?\s+{_MONTH.format('m')}(?![a-z])", re.IGNORECASE),
    # June 11, June 11th (a following 4-digit number would have matched above)
    re.compile(rf"\b{_MONTH.format('m')}\s+{_DAY.format('d')}\b(?!\s*,?\s*\d)", re.IGNORECASE),
]


@dataclass(frozen=True)
class DateMention:
    """One date in a text: its possible readings and where it sits (character offsets)."""

    readings: frozenset[Reading]
    start: int
    end: int

    @property
    def year(self) -> int | None:
        years = {r[0] for r in self.readings}
        return years.pop() if len(years) == 1 else None

    def canonical(self) -> str:
        """A spelling every format of the same date shares ("11 june 2003", "june 2003"), so word
        coverage and word pairs meet across formats. An ambiguous numeric date keeps its first
        reading (day/month)."""
        year, month, day = min(self.readings, key=lambda r: (r[0] or 0, r[1] or 0, r[2] or 0))
        parts = [str(day) if day else "", MONTH_NAMES[month - 1] if month else "", str(year) if year else ""]
        return " ".join(p for p in parts if p)


def _valid(year: int | None, month: int | None, day: int | None) -> bool:
    # a day needs its month ("the 11th" alone is not a date)
    return (month is None or 1 <= month <= 12) and (day is None or 1 <= day <= 31) and (
        month is not None or day is None)


def _month(raw: str) -> int:
    return int(raw) if raw.isdigit() else MONTH_NUMBERS[raw.lower().rstrip(".")]


def find_dates(text: str) -> list[DateMention]:
    """Every date of ``text`` with a month (a bare year is not returned), in order of position.

    The month name "May" counts only capitalised (else it is the verb): "may 2003" in lower-cased
    text is still read as a date, because a verb is never followed by a year.
    """
    taken: list[tuple[int, int]] = []
    out: list[DateMention] = []
    for k, pattern in enumerate(_PATTERNS):
        for m in pattern.finditer(text):
            if any(m.start() < e and s < m.end() for s, e in taken):
                continue
            groups = m.groupdict()
            readings: set[Reading] = set()
            year = int(groups["y"]) if groups.get("y") else None
            if k == 1:
                a, b = int(groups["a"]), int(groups["b"])
                readings = {(year, mo, d) for d, mo in ((a, b), (b, a)) if _valid(year, mo, d)}
            else:
                month = _month(groups["m"]) if groups.get("m") else None
                day = int(groups["d"]) if groups.get("d") else None
                if month == 5 and groups["m"][0] == "m" and year is None:
                    continue  # "may 11" in running text is "may" the verb more often than not
                if _valid(year, month, day):
                    readings = {(year, month, day)}
            if readings:
                taken.append((m.start(), m.end()))
                out.append(DateMention(frozenset(readings), m.start(), m.end()))
    return sorted(out, key=lambda d: d.start)


def reading_supported(claim: Reading, evidence: Reading) -> bool:
    """The evidence reading states every part the claim states, with the same value."""
    return all(c is None or c == e for c, e in zip(claim, evidence, strict=True))


def date_supported(claim: DateMention, evidence: Iterable[DateMention]) -> bool:
    """Some reading of the claim's date is supported by some reading of an evidence date."""
    return any(reading_supported(c, e) for ev in evidence for e in ev.readings for c in claim.readings)
