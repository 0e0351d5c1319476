"""Lexical evidence for grounding: what embeddings cannot see.

Cosine similarity rates "water boils at 50 °C" and "water boils at 100 °C" as near-identical. The
checks here look at the things a fabricated claim usually gets wrong — numbers, dates, names and
negation — and at how much of the claim's content the evidence actually covers.

All functions are pure and work on :class:`TextFeatures`, computed once per text (and cached by
the caller, since the same passages recur).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache

from ragtrace_evaluator.labellers.quantities import DateMention, Reading, find_dates, reading_supported


def _wordlist(text: str) -> frozenset[str]:
    return frozenset(text.split())


# A standard English stop-word list (function words only: no content-bearing verbs or nouns).
STOPWORDS = _wordlist(
    """
    a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has
    have having he her here hers herself him himself his how i if in into is it its itself just me
    more most my myself nor of off on once only or other our ours ourselves out over own same she
    should so some such than that the their theirs them themselves then there these they this those
    through to too under until up very was we were what when where which while who whom why will
    with would you your yours yourself yourselves also s t ll d m re ve y o well us may might must
    shall one's it's i'm i've i'd you're they're we're he's she's that's there's what's let's
    """
)
NEGATIONS = _wordlist(
    """
    not no never none nobody nothing neither nor nowhere without cannot n't isn't wasn't aren't
    weren't don't doesn't didn't won't wouldn't can't couldn't shouldn't hasn't haven't hadn't
    """
)
NEGATION_SCOPE = 3
#: "not only", "not just", "not merely": an additive, not a negation
_NOT_NEGATING_NEXT = frozenset({"only", "just", "merely", "simply"})
# Capitalised at the start of a text but not names: interjections and sentence adverbs.
_NOT_NAMES = _wordlist(
    """
    yes yeah yea yep no nope oh ah well wow hi hello hey ok okay sure even also however still yet now
    today later instead meanwhile although though because since after before during while perhaps maybe
    actually really indeed unfortunately fortunately interestingly apparently currently originally
    recently sometimes often usually first firstly second finally then thus therefore hence besides lol
    haha hmm um uh
    """
)
MONTHS = {
    m: i + 1 for i, names in enumerate(
        [("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",),
         ("june", "jun"), ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"),
         ("october", "oct"), ("november", "nov"), ("december", "dec")]
    ) for m in names
}
_NUMBER_WORDS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30,
    "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100,
    "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8,
    "ninth": 9, "tenth": 10, "twice": 2, "once": 1, "dozen": 12, "half": 0.5,
}
_SCALES = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12, "k": 1e3, "m": 1e6, "bn": 1e9}
_TOKEN = re.compile(r"\d+(?:[.,]\d+)*%?|[A-Za-z]+(?:['’][A-Za-z]+)?")
# A date found by `quantities.find_dates` is replaced by "\x00k\x00" before tokenising (k = its index),
# so every format of one date yields the same words; sentence ends (".", "!", "?", a line break) are
# kept as tokens of their own, because the word after one is sentence-initial.
_TOKEN_OR_BREAK = re.compile(r"\x00\d+\x00|" + _TOKEN.pattern + r"|[,;:()\[\]—–]|\s-\s|[.!?]+|\n")
_NUMERIC = re.compile(r"(\d+(?:,\d{3})*(?:\.\d+)?)(%?)")
# Capitalised, but titles and abbreviations, not names ("Sr. Smith", "Dr. Lee", "Acme Inc.").
_ABBREVIATIONS = _wordlist(
    """
    mr mrs ms mx dr prof sr jr st mt ft vs etc inc ltd co corp llc plc dept est gen gov sen rep col lt sgt
    capt cpl adm hon rev fr no nos vol vols fig figs approx ca cf pp
    """
)


@dataclass(frozen=True)
class TextFeatures:
    """Lexical view of one text (a claim or an evidence sentence)."""

    #: content stems in order (stop-words removed), for coverage and bigrams
    stems: tuple[str, ...]
    #: numeric values mentioned (numbers, number words with scales, percentages, the years of dates),
    #: rounded; the day of a date is not a number of its own
    numbers: frozenset[float]
    #: years (1000–2099) mentioned, bare or inside a date
    years: frozenset[int]
    #: month numbers mentioned, bare or inside a date
    months: frozenset[int]
    #: lower-cased capitalised words that are likely names: not a sentence's first word (unless a
    #: capitalised word follows it: "New York"), not a title or abbreviation, not in all-capitals text
    entities: frozenset[str]
    #: count of negation cues
    negations: int
    #: adjacent content-stem pairs inside one clause (commas, semicolons, brackets and dashes end a
    #: clause: a pair across them links two separate statements)
    pairs: frozenset[tuple[str, str]] = frozenset()
    #: ``pairs`` plus pairs one content word apart, so an inserted modifier in the evidence
    #: ("completed in March 1889") does not break the claim's pair ("completed in 1889")
    loose_pairs: frozenset[tuple[str, str]] = frozenset()
    #: content stems in the scope of a negation: up to NEGATION_SCOPE content words after a cue,
    #: within its clause ("did not reduce blood pressure" negates reduce, blood, pressure)
    negated: frozenset[str] = frozenset()
    #: the first content stem after each negation cue: what the negation is about ("did not
    #: *reduce* blood pressure", "no *rule* against")
    negated_heads: frozenset[str] = frozenset()
    #: the dates with a month (see `quantities`), each as its set of possible readings
    dates: frozenset[frozenset[Reading]] = frozenset()
    #: years and months stated on their own, outside any date ("in 1889", "in March")
    bare_years: frozenset[int] = frozenset()
    bare_months: frozenset[int] = frozenset()

    @property
    def stem_set(self) -> frozenset[str]:
        return frozenset(self.stems)

    @property
    def plain_numbers(self) -> frozenset[float]:
        """Numbers that are neither years nor parts of a date."""
        return frozenset(n for n in self.numbers if not (n.is_integer() and int(n) in self.years))


def stem(word: str) -> str:
    """A light suffix stripper: enough to match plural/tense variants, never a full stemmer."""
    w = word.lower().replace("’", "'")
    if w.endswith("'s"):
        w = w[:-2]
    for suffix, min_len in (("ies", 5), ("ing", 6), ("ed", 5), ("es", 5), ("s", 4), ("ly", 6)):
        if not w.endswith(suffix) or len(w) < min_len or w.endswith("ss"):
            continue
        if suffix == "es" and not w[:-2].endswith(("s", "x", "z", "ch", "sh")):
            continue  # "metres" → "metre" (the "s" rule), but "boxes" → "box"
        w = w[: -len(suffix)] + ("y" if suffix == "ies" else "")
        break
    # A final silent "e" goes too, so "reduce" and "reduced", "base" and "based" meet ("reduc", "bas").
    return w[:-1] if len(w) >= 4 and w.endswith("e") and not w.endswith("ee") else w


def _to_number(raw: str) -> float | None:
    try:
        return float(raw.replace(",", ""))
    except ValueError:
        return None


def _round(value: float) -> float:
    return round(value, 6)


def _mask_dates(text: str) -> tuple[str, list[DateMention]]:
    mentions = find_dates(text)
    if not mentions:
        return text, mentions
    parts: list[str] = []
    pos = 0
    for k, m in enumerate(mentions):
        parts.append(text[pos:m.start])
        parts.append(f" \x00{k}\x00 ")
        pos = m.end
    parts.append(text[pos:])
    return "".join(parts), mentions


@lru_cache(maxsize=200_000)
def features(text: str) -> TextFeatures:
    """Lexical features of ``text``; cached because evidence sentences recur across claims."""
    masked, mentions = _mask_dates(text)
    raw = _TOKEN_OR_BREAK.findall(masked)
    # Words in order, with "" marking a clause break (punctuation that separates statements) and "."
    # a sentence end; a date becomes the words of its canonical spelling ("11 june 2003").
    tokens: list[str] = []
    date_of: dict[int, DateMention] = {}
    for tok in raw:
        if tok.startswith("\x00"):
            mention = mentions[int(tok.strip("\x00"))]
            for word in mention.canonical().split():
                date_of[len(tokens)] = mention
                tokens.append(word)
        elif tok[0].isalnum():
            tokens.append(tok)
        elif tok[0] in ".!?\n":
            # "Dr." and initials ("J.", "U.S.") do not end a sentence
            prev = tokens[-1].lower() if tokens else ""
            tokens.append("" if prev in _ABBREVIATIONS or len(prev) == 1 else ".")
        else:
            tokens.append("")
    shouting = not any(c.islower() for c in text)
    stems: list[str] = []
    stem_segments: list[int] = []
    segment = 0
    numbers: set[float] = set()
    years: set[int] = set()
    months: set[int] = set()
    bare_years: set[int] = set()
    bare_months: set[int] = set()
    entities: set[str] = set()
    negations = 0
    negated: set[str] = set()
    heads: set[str] = set()
    scope_left = 0
    prev_number: float | None = None
    sentence_start = True
    for i, tok in enumerate(tokens):
        if tok in ("", "."):
            segment += 1
            scope_left = 0
            sentence_start = sentence_start or tok == "."
            continue
        initial, sentence_start = sentence_start, False
        low = tok.lower().replace("’", "'")
        if i in date_of:
            if tok.isdigit() and len(tok) == 4:
                years.add(int(tok))
                numbers.add(float(tok))
            elif low in MONTHS:
                months.add(MONTHS[low])
            stems.append(stem(low) if not tok.isdigit() else tok)
            stem_segments.append(segment)
            prev_number = None
            continue
        if low in NEGATIONS or low.endswith("n't"):
            # "no" is a determiner negation only before a content word ("no evidence"); "no but",
            # "no, it is" are an interjection.
            # "not only / not just X, but Y" asserts X; it negates nothing.
            nxt = tokens[i + 1].lower() if i + 1 < len(tokens) else ""
            if low == "not" and nxt in _NOT_NEGATING_NEXT:
                continue
            if low != "no" or (nxt and nxt not in STOPWORDS):
                negations += 1
                scope_left = NEGATION_SCOPE
            continue
        if tok[0].isdigit():
            match = _NUMERIC.fullmatch(tok)
            value = _to_number(match.group(1)) if match else None
            if value is not None:
                numbers.add(_round(value))
                if match and not match.group(2) and "." not in tok and "," not in tok and 1000 <= value <= 2099:
                    years.add(int(value))
                    bare_years.add(int(value))
                prev_number = value
                stems.append(tok.rstrip("%"))
                stem_segments.append(segment)
                if scope_left:
                    if scope_left == NEGATION_SCOPE:
                        heads.add(stems[-1])
                    negated.add(stems[-1])
                    scope_left -= 1
                continue
        if low in _SCALES and prev_number is not None and (low not in ("k", "m") or i > 0):
            numbers.add(_round(prev_number * _SCALES[low]))
            prev_number = None
            continue
        prev_number = None
        if low in _NUMBER_WORDS:
            numbers.add(_round(float(_NUMBER_WORDS[low])))
            prev_number = float(_NUMBER_WORDS[low])
        if low in MONTHS and (low != "may" or tok[0].isupper()):
            months.add(MONTHS[low])
            bare_months.add(MONTHS[low])
        if low in STOPWORDS:
            continue
        if tok[0].isupper() and len(tok) > 1 and not shouting and _is_name(low, i, initial, tokens):
            entities.add(low)
        stems.append(stem(low))
        stem_segments.append(segment)
        if scope_left:
            if scope_left == NEGATION_SCOPE:
                heads.add(stems[-1])
            negated.add(stems[-1])
            scope_left -= 1
    pairs = set()
    loose = set()
    for j in range(len(stems) - 1):
        if stem_segments[j + 1] == stem_segments[j]:
            pairs.add((stems[j], stems[j + 1]))
            loose.add((stems[j], stems[j + 1]))
        if j + 2 < len(stems) and stem_segments[j + 2] == stem_segments[j]:
            loose.add((stems[j], stems[j + 2]))
    return TextFeatures(tuple(stems), frozenset(numbers), frozenset(years), frozenset(months),
                        frozenset(entities), negations, frozenset(pairs), frozenset(loose), frozenset(negated),
                        frozenset(heads), frozenset(m.readings for m in mentions), frozenset(bare_years),
                        frozenset(bare_months))


def _is_name(low: str, i: int, initial: bool, tokens: Sequence[str]) -> bool:
    """Is the capitalised word ``tokens[i]`` (lower-cased ``low``) likely a name?

    Month names and number words are dates and numbers (checked as such); titles and abbreviations
    ("Sr.", "Dr.", "Inc.") are not names. A sentence's first word is capitalised by grammar
    ("Additionally, ...", "Furthermore, ...", a bullet's first word), so it counts as a name only
    when the next word is capitalised too ("New York was ...", "Hepround Energy said ..."). Any
    word the same text also uses in lower case is a common word.
    """
    if low in MONTHS or low in _NUMBER_WORDS or low in _ABBREVIATIONS or low in _NOT_NAMES:
        return False
    if low in (t for t in tokens if t and t[0].islower()):
        return False
    if initial:
        nxt = tokens[i + 1] if i + 1 < len(tokens) else ""
        return bool(nxt) and nxt[0].isupper() and nxt.lower() not in STOPWORDS
    return True


def merge(items: Iterable[TextFeatures]) -> TextFeatures:
    """The union of several texts' features (stems concatenated in order)."""
    stems: list[str] = []
    numbers: set[float] = set()
    years: set[int] = set()
    months: set[int] = set()
    entities: set[str] = set()
    negations = 0
    pairs: set[tuple[str, str]] = set()
    loose: set[tuple[str, str]] = set()
    negated: set[str] = set()
    heads: set[str] = set()
    dates: set[frozenset[Reading]] = set()
    bare_years: set[int] = set()
    bare_months: set[int] = set()
    for f in items:
        negated |= f.negated
        heads |= f.negated_heads
        stems.extend(f.stems)
        pairs |= f.pairs
        loose |= f.loose_pairs
        numbers |= f.numbers
        years |= f.years
        months |= f.months
        entities |= f.entities
        negations += f.negations
        dates |= f.dates
        bare_years |= f.bare_years
        bare_months |= f.bare_months
    return TextFeatures(tuple(stems), frozenset(numbers), frozenset(years), frozenset(months),
                        frozenset(entities), negations, frozenset(pairs), frozenset(loose), frozenset(negated),
                        frozenset(heads), frozenset(dates), frozenset(bare_years), frozenset(bare_months))


def coverage(claim: TextFeatures, evidence: TextFeatures) -> float:
    """Share of the claim's distinct content stems found in the evidence (1.0 for a claim with none)."""
    claim_set = claim.stem_set
    if not claim_set:
        return 1.0
    return len(claim_set & evidence.stem_set) / len(claim_set)


# The speaker in the first person singular. Retrieved passages (encyclopedic, news, manuals) rarely
# speak as "I"; an answer that does states the generator's own persona ("I have been there twice",
# "my favourite album"), which no such passage supports.
_FIRST_PERSON = re.compile(r"\b(?:i|me|my|mine|myself|i['’](?:m|ve|d|ll))\b", re.IGNORECASE)
# ... unless "I" only frames the claim as belief, hearsay or a report: "I think X", "I heard that X",
# "I found that X" (a RAG answer citing its sources) assert X.
_HEDGE_FRAME = re.compile(
    r"\bi\s+(?:(?:really|do|also|just|can|would|could)\s+)?(?:think|believe|guess|suppose|know|heard|read|learned|"
    r"understand|feel|bet|hope|agree|assume|imagine|doubt|found|see|noticed|confirm|say)\b(?:\s+that)?|\bi['’]m\s+(?:sure|not\s+sure|told|aware)\b"
    r"(?:\s+that)?|\b(?:as\s+far\s+as\s+i\s+know|if\s+i\s+(?:recall|remember)|i\s+(?:recall|remember)\s+that)\b",
    re.IGNORECASE,
)


@lru_cache(maxsize=200_000)
def first_person(text: str) -> bool:
    """The text speaks in the first person singular about its speaker, beyond a hedge ("I think")."""
    return bool(_FIRST_PERSON.search(_HEDGE_FRAME.sub(" ", text)))


def bigram_coverage(claim: TextFeatures, evidence: TextFeatures) -> float:
    """Share of the claim's content bigrams found in the evidence; word order and pairing matter here,
    which unigram coverage cannot see ("A beat B" vs "B beat A" aside, it catches recombined facts)."""
    grams = claim.pairs
    unigram = coverage(claim, evidence)
    if not grams:
        return unigram
    # Shrunk toward unigram coverage by one pseudo-pair: a short claim with one or two pairs would
    # otherwise swing between 0 and 1 on a single rewording ("based in Foxborough" vs "play in
    # Foxborough"); a long claim's value barely moves.
    return (len(grams & evidence.loose_pairs) + unigram) / (len(grams) + 1)


def _number_found(value: float, pool: frozenset[float]) -> bool:
    if value in pool:
        return True
    # A claim may round what the evidence states ("3.5 million" for 3,482,000; "3.5" for 3.47):
    # accept evidence that rounds to the claim at the claim's own precision. Whole numbers below
    # 10,000 (counts, years) must match exactly: 1901 is not "about" 1889.
    exponent = Decimal(repr(value)).normalize().as_tuple().exponent
    if not isinstance(exponent, int) or (exponent >= 0 and abs(value) < 10_000):
        return False
    return any(round(v, -exponent) == value for v in pool)


def _date_found(readings: frozenset[Reading], evidence: TextFeatures) -> bool:
    return any(reading_supported(c, e) for ev in evidence.dates for e in ev for c in readings)


def missing_numbers(claim: TextFeatures, evidence: TextFeatures) -> float:
    """Share of the claim's numbers, dates, years and months that the evidence does not state;
    0.0 when it states none. A date must agree on every part the claim gives (see `quantities`);
    a bare year or month matches the same year or month anywhere in the evidence, dates included."""
    plain = claim.plain_numbers
    total = len(plain) + len(claim.dates) + len(claim.bare_years) + len(claim.bare_months)
    if not total:
        return 0.0
    missing = sum(1 for n in plain if not _number_found(n, evidence.numbers))
    missing += sum(1 for d in claim.dates if not _date_found(d, evidence))
    missing += len(claim.bare_years - evidence.years) + len(claim.bare_months - evidence.months)
    return missing / total


def missing_entities(claim: TextFeatures, evidence: TextFeatures) -> float:
    """Share of the claim's probable names whose words are absent from the evidence (compared by
    stem, case-insensitively, because evidence may be lower-cased)."""
    if not claim.entities:
        return 0.0
    evidence_words = evidence.stem_set | {e for e in evidence.entities}
    missing = sum(1 for e in claim.entities if stem(e) not in evidence_words and e not in evidence_words)
    return missing / len(claim.entities)


def number_conflict(claim: TextFeatures, aligned: TextFeatures) -> bool:
    """The claim states a number or date the aligned evidence sentence does not, while that sentence
    states another one of the same kind (a date for a date, a year for a year, any number for a
    number)."""
    if claim.dates and aligned.dates and not any(_date_found(d, aligned) for d in claim.dates):
        return True
    claim_years = claim.years
    if claim_years and aligned.years and not (claim_years & aligned.years):
        return True
    other_claim = claim.plain_numbers
    other_aligned = aligned.plain_numbers
    if other_claim and other_aligned and not any(_number_found(n, aligned.numbers) for n in other_claim):
        return True
    return bool(claim.months and aligned.months and not (claim.months & aligned.months))


def negation_mismatch(claim: TextFeatures, aligned: TextFeatures) -> bool:
    """One side negates what the other states: the word a negation is about (the first content word
    after the cue) appears un-negated on the other side. A negation elsewhere in a long sentence, a
    bare "no," / "not really," (scope ended by punctuation), or "not only X, but Y", is not a mismatch."""
    claim_only = (claim.negated_heads & aligned.stem_set) - aligned.negated
    aligned_only = (aligned.negated_heads & claim.stem_set) - claim.negated
    return bool(claim_only or aligned_only)


def entity_conflict(claim: TextFeatures, aligned: TextFeatures) -> bool:
    """The claim names something the aligned sentence does not, and that sentence names something the
    claim does not: a likely substitution ("Paris" for "Lyon")."""
    if not claim.entities or not aligned.entities:
        return False
    aligned_words = aligned.stem_set | aligned.entities
    claim_words = claim.stem_set | claim.entities
    claim_missing = any(stem(e) not in aligned_words and e not in aligned_words for e in claim.entities)
    aligned_extra = any(stem(e) not in claim_words and e not in claim_words for e in aligned.entities)
    return claim_missing and aligned_extra


@lru_cache(maxsize=50_000)
def name_phrases(text: str) -> tuple[tuple[str, ...], ...]:
    """The likely names of ``text`` as phrases: runs of adjacent name words, lower-cased
    ("What does Loutrem Dynamics make?" -> (("loutrem", "dynamics"),)). Same name rule as
    :func:`features` (a sentence's first word only before another capitalised word; no titles)."""
    masked, _ = _mask_dates(text)
    tokens: list[str] = []
    for tok in _TOKEN_OR_BREAK.findall(masked):
        if tok.startswith("\x00") or not (tok[0].isalnum() or tok[0] in ".!?\n"):
            tokens.append("")
        elif tok[0] in ".!?\n":
            prev = tokens[-1].lower() if tokens else ""
            tokens.append("" if prev in _ABBREVIATIONS or len(prev) == 1 else ".")
        else:
            tokens.append(tok)
    if not any(c.islower() for c in text):
        return ()
    phrases: list[tuple[str, ...]] = []
    run: list[str] = []
    sentence_start = True
    for i, tok in enumerate(tokens):
        if tok in ("", "."):
            sentence_start = sentence_start or tok == "."
            if run:
                phrases.append(tuple(run))
                run = []
            continue
        initial, sentence_start = sentence_start, False
        low = tok.lower().replace("’", "'")
        if tok[0].isupper() and len(tok) > 1 and low not in STOPWORDS and _is_name(low, i, initial, tokens):
            run.append(low)
        elif run:
            phrases.append(tuple(run))
            run = []
    if run:
        phrases.append(tuple(run))
    return tuple(dict.fromkeys(phrases))
