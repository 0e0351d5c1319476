"""Answers → atomic claims, plus the two kinds of answer that make no claim at all.

An *abstention* ("I cannot answer that", "The context does not say") and a *generic* reply
("haha, I agree!", "Do you like jazz?") carry nothing that a passage could support or contradict.
Scoring them as grounded (1.0) or ungrounded (0.0) would bias groundedness either way, so
:func:`extract_claims` reports them apart and the labellers leave their groundedness undefined.

Splitting is deliberately rule-based and conservative: sentences first (aware of abbreviations,
initials and decimals), then clauses joined by a semicolon or by ", and/but/while/whereas …" when
both sides are long enough to assert something on their own. A finer split would produce fragments
("and in 1994") whose support cannot be judged without the sentence they came from.

How two rules were chosen (offline-6; a priori, not fitted to any labelled set):

- Lower-cased text (chat logs, transcripts) has no capital to start a sentence, so it used to stay
  one sentence, and a closing question ("... . did you know ...?") made the whole answer look like a
  question. Text without any capital now splits before any letter (abbreviations still hold).
- A sentence with a single content word used to make no claim, which turned the short answers RAG
  services give ("Paris.", "In 1889.", "It is a comedy.", "He was a mathematician.") into generic
  replies with undefined groundedness. One content word now makes a claim, unless the sentence
  speaks of the speaker or the listener ("I like dogs.", "You're right."): that is chit-chat.
  Contractions of filler words ("that's", "he's") and a few interjections ("absolutely") joined
  the filler list, so "That's true!" still makes no claim.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ragtrace_evaluator.labellers.lexical import STOPWORDS
from ragtrace_evaluator.labellers.protocol import AnswerKind


def _wordlist(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Tokens that end a sentence only in appearance.
_ABBREVIATIONS = _wordlist(
    """
    mr mrs ms dr prof sr jr st mt ft vs etc e.g i.e approx no vol fig inc ltd co corp dept est gen
    gov sen rep col lt sgt capt jan feb mar apr jun jul aug sep sept oct nov dec u.s u.k a.m p.m
    """
)
# A mark written apart from its word (" . ", " ? ", " ! ": tokenised text, as in Wizard-of-Wikipedia and
# FaithDial turns) ends a sentence before a lower-case word too: "... family . what is your favorite plant ?"
_DETACHED_END = r"(?<=\s[.!?])\s+(?=[\"'(\[]?[a-z])"
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])|" + _DETACHED_END
                           + r"|\n\s*\n|\n(?=\s*[-*•]\s)")
# Lower-cased text (chat, speech transcripts) has no capital to start a sentence: there any letter may.
_SENTENCE_END_LOWER = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[a-z0-9])|\n\s*\n|\n(?=\s*[-*•]\s)")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
_ENUMERATOR = re.compile(r"\(?(?:\d{1,2}|[a-z]|[ivx]{1,4})[.)]|[-*•]", re.IGNORECASE)
# "The key points are: 1." -- a list's first marker left at the end of its lead-in sentence
_TRAILING_ENUMERATOR = re.compile(r"([:;])\s+\(?(?:\d{1,2}|[a-z])[.)]$", re.IGNORECASE)
_CLAUSE_SPLIT = re.compile(r";\s+|,\s+(?=(?:and|but|while|whereas|although)\s)", re.IGNORECASE)
_LEADING_CONJ = re.compile(r"^(?:and|but|while|whereas|although)\s+", re.IGNORECASE)

# Abstentions: the answer declines to answer, or says the evidence is missing. Matched anywhere
# in a short answer, or as the whole first sentence of a longer one.
_ABSTENTION = re.compile(
    r"\b(?:"
    r"i\s*(?:can ?not|can't|cannot|am unable to|'m unable to|am not able to|'m not able to|do not|don't)"
    r"\s+(?:answer|say|tell|determine|find|know|provide|help with|be sure|confirm|verify)"
    r"|i\s+(?:do not|don't)\s+have\s+(?:enough\s+)?(?:information|data|details|context|knowledge)"
    r"|i\s+have\s+no\s+(?:idea|information)"
    r"|(?:the|this|provided|given)\s+(?:context|passages?|documents?|sources?|information|text)s?"
    r"\s+(?:does|do|did)\s*(?:not|n't)\s+(?:say|mention|contain|provide|specify|state|include|answer)"
    r"|(?:there is|there's)\s+(?:no|not enough)\s+(?:information|mention|evidence|data)"
    r"|(?:no|not enough)\s+(?:relevant\s+)?(?:information|evidence)\s+(?:is\s+)?(?:available|provided|given)"
    r"|(?:is|are)\s+not\s+(?:mentioned|specified|stated|provided)\s+in\s+the\s+"
    r"(?:context|passages?|documents?|sources?|text)"
    r"|unable\s+to\s+(?:answer|determine|find)"
    r"|i(?:\s+am|\s*['’]m)\s+not\s+(?:sure|certain)"
    r")",
    re.IGNORECASE,
)

# Words that carry no checkable content in conversational replies (greetings, agreement, feelings).
_FILLER = _wordlist(
    """
    a an the and or but so to of in on at for with about as by from that this these those it its
    it's i i'm im me my we us our you your yours u he she they them his her their is am are was were
    be been being do does did done have has had will would can could should may might must shall not
    no yes yeah yea yep nope ok okay oh ah haha hah lol lmao wow hi hello hey bye goodbye thanks
    thank please sure well really very so too also just totally definitely indeed agree agreed true
    right exactly cool nice great good awesome amazing interesting fun funny love like likes liked
    enjoy enjoyed hope think thought guess know knew mean feel felt glad sorry happy day talk
    talking chat chatting what how why when where who which there here then than more most much many
    some any all one thing things stuff lot lots pretty kind sort maybe probably doubt idea me too
    same wish fine bad sad let let's go going gonna want wanna see sounds sound seem seems get got
    make made say said tell told
    that's it's he's she's there's here's what's who's they're we're you're i've i'd i'll you've
    they've we've isn't aren't wasn't weren't don't doesn't didn't can't won't couldn't wouldn't
    absolutely certainly surely omg hmm huh aww nah yup
    """
)
# "I don't know, but X": a hedge followed by a claim is not a refusal; the claim is judged.
_HEDGE_TURN = re.compile(r"\b(?:but|however|though|although|yet|i\s+(?:do\s+)?know\s+that)\b\s*,?\s*",
                         re.IGNORECASE)
# "Did you know (that) X?" presupposes X: the question asserts it.
_PRESUPPOSING_QUESTION = re.compile(
    r"(?:^|\b)(?:do|did)\s+you\s+know\s+(?:that\s+)?(?!(?:what|how|who|where|when|why|which|if|whether|about|"
    r"anything|much|any)\b)(.+?)\s*\?$",
    re.IGNORECASE,
)
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’\-]*")
#: a clause split off its sentence must name at least this many content words to be judged alone
#: ("and it is the capital" is not checkable without the sentence it came from)
CLAUSE_MIN_CONTENT_WORDS = 2
#: the speakers of a conversation: a sentence about them with a single content word is chit-chat
#: ("I like dogs.", "You are right.", "Me too, I love it!")
_INTERLOCUTOR = re.compile(r"\b(?:i|me|my|mine|you|your|yours|we|us|our|u|ya)\b|\bi['’]", re.IGNORECASE)

# Words an answer uses to talk about itself, its sources or the conversation ("Here's a concise
# summary of the passage:", "I hope this helps!", "Let me know if you have other questions."). A
# sentence made only of these (and filler) points at content without stating any: no claim.
_META_WORDS = _wordlist(
    """
    passage passages text texts article articles document documents context source sources excerpt
    summary summaries summarize summarise summarized summarised overview answer answers question
    questions response information details detail following below above provided given based key main
    point points concise brief short detailed quick list topic topics aspects highlights help helps
    helpful hope assist assistance further ask asking asked feel free note notes certainly discuss
    discusses discussed describe describes described explain explains explained mention mentions mentioned state states
    stated talk talks cover covers covered outline outlines present presents presented focus focuses
    provide provides include includes including here's here are below several various reasons
    """
)
# A frame that attributes the claim to the passage ("The passage states that X", "According to the
# text, X", "This document explains X"): X is the claim; the frame's words are in no evidence.
_META_FRAME = re.compile(
    r"^(?:(?:according\s+to|based\s+on|as\s+(?:stated|mentioned|described|noted|explained)\s+in)\s+"
    r"(?:the|this|these)\s+(?:provided\s+|given\s+|above\s+)?"
    r"(?:passages?|texts?|documents?|articles?|context|excerpts?|sources?|information)\s*,?\s*"
    r"|(?:the|this)\s+(?:(?:first|second|last|final|next)\s+(?:half|part|section|paragraph)\s+of\s+the\s+)?"
    r"(?:provided\s+|given\s+|above\s+)?(?:passages?|texts?|documents?|articles?|context|excerpts?|sources?)\s+"
    r"(?:also\s+)?(?:discuss(?:es)?|describes?|explains?|mentions?|states?|says|notes?|reports?|highlights?|covers?|"
    r"outlines?|presents?|focuses\s+on|talks\s+about|is\s+about|deals\s+with|introduces|"
    r"provides\s+(?:information|details)\s+(?:on|about)|"
    r"(?:begins|starts|opens|commences)(?:\s+off)?\s+with(?:\s+an?\s+(?:introduction|overview)\s+(?:to|of))?)"
    r"\s+(?:that\s+)?)",
    re.IGNORECASE,
)
# Connectives that open a sentence ("Additionally, ...", "In summary, ..."): grammar, not content.
_LEADING_CONNECTIVE = re.compile(
    r"^(?:in\s+(?:summary|conclusion|short|brief|addition|other\s+words|total|general)|to\s+(?:summari[sz]e|sum\s+up|"
    r"conclude)|overall|additionally|furthermore|moreover|also|however|finally|firstly|secondly|thirdly|lastly|"
    r"first|second|third|next|then|besides|therefore|thus|hence|for\s+(?:example|instance)|as\s+a\s+result|"
    r"meanwhile|importantly|notably|specifically|similarly|likewise|consequently|nevertheless|nonetheless|sure|"
    r"certainly|of\s+course|yes|no|well)\s*[,:]\s+",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class ExtractedClaims:
    """The claims of one answer. ``claims`` is empty unless ``kind == "claims"``."""

    kind: AnswerKind
    claims: tuple[str, ...]


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text`` in order; bullets and blank-line paragraphs also end a sentence.

    A period after a known abbreviation, a single capital (an initial) or a run of initials
    ("A.V.", "J.R.R.") does not end a sentence, and neither does one inside a number ("3.5").
    A sentence starts with a capital, a digit or a quote, except in text with no capital at all
    (lower-cased chat or transcripts: "yeah. did you know ..."), where any letter may start one;
    otherwise such a text would be one long sentence, and a closing question would swallow the
    statements before it.
    """
    text = text.strip()
    if not text:
        return []
    pieces: list[str] = []
    start = 0
    boundary = _SENTENCE_END if any(c.isupper() for c in text) else _SENTENCE_END_LOWER
    for match in boundary.finditer(text):
        candidate = text[start:match.start()].rstrip()
        words = candidate.rsplit(None, 2) if candidate else [""]
        last = words[-1]
        stem = last.rstrip(".").lower().lstrip("(\"'")
        if last.endswith(".") and (stem in _ABBREVIATIONS or re.fullmatch(r"[a-z](?:\.[a-z])*", stem)):
            continue
        # A tokeniser also detaches the last dot of a dotted abbreviation ("4 p.m . et", "peter m.f .
        # mbithi", "all u.s . department": FIB's CNN/DM articles): that ends nothing either.
        if last == "." and len(words) > 1 and re.fullmatch(r"[a-z](?:\.[a-z])+", words[-2].lower().lstrip("(\"'")):
            continue
        # and an ellipsis written apart (". . .") before a lower-case word goes on with the sentence
        if last == "." and len(words) > 1 and words[-2] == "." and text[match.end():match.end() + 1].islower():
            continue
        pieces.append(candidate)
        start = match.end()
    pieces.append(text[start:])
    out = []
    for piece in pieces:
        piece = _TRAILING_ENUMERATOR.sub(r"\1", _BULLET.sub("", piece.strip())).strip()
        # A list's bare marker ("1.", "2)", "(iii)", "b.") split off as a sentence of its own states nothing.
        if piece and not _ENUMERATOR.fullmatch(piece):
            out.append(piece)
    return out


def _split_points(sentence: str) -> list[str]:
    """``sentence`` cut at each clause boundary, except the ", and" that closes a list ("poets,
    songwriters, and novelists"): one whose preceding comma-separated item is at most two words."""
    pieces: list[str] = []
    start = 0
    for m in _CLAUSE_SPLIT.finditer(sentence):
        before = sentence[start:m.start()]
        if m.group().startswith(",") and "," in before and len(_WORD.findall(before.rsplit(",", 1)[1])) <= 2:
            continue
        pieces.append(before)
        start = m.end()
    pieces.append(sentence[start:])
    return pieces


def split_clauses(sentence: str, min_words: int = 4) -> list[str]:
    """Split a sentence at semicolons and clause-level conjunctions when both sides have at least
    ``min_words`` words; otherwise keep it whole."""
    parts = [p.strip() for p in _split_points(sentence) if p and p.strip()]
    if len(parts) <= 1:
        return [sentence.strip()]
    merged: list[str] = []
    for part in parts:
        part = _LEADING_CONJ.sub("", part)
        if merged and (len(_WORD.findall(part)) < min_words or len(_WORD.findall(merged[-1])) < min_words):
            merged[-1] = f"{merged[-1]}, {part}"
        else:
            merged.append(part)
    return merged


def content_words(text: str) -> list[str]:
    """Lower-cased words of ``text`` that are not conversational filler."""
    return [w for w in (t.lower().replace("’", "'").strip("'-") for t in _WORD.findall(text))
            if w and w not in _FILLER]


def _abstention_match(text: str) -> re.Match[str] | None:
    sentences = split_sentences(text)
    if not sentences:
        return None
    head = sentences[0] if len(sentences) > 1 else text
    return _ABSTENTION.search(head)


def _hedged_claim_text(text: str, match: re.Match[str]) -> str | None:
    """The claim after a hedge ("I'm not sure, but X" → "X"), if it asserts at least 3 content words."""
    turn = _HEDGE_TURN.search(text, match.end())
    if turn is None:
        return None
    rest = text[turn.end():].strip()
    return rest if len(content_words(rest)) >= 3 else None


def is_abstention(text: str) -> bool:
    """True when the answer declines to answer or says the evidence is missing.

    Only the first sentence (or a short answer as a whole) is checked, so an answer that explains
    what the passages do not say *after* answering is not mistaken for a refusal; and a hedge
    followed by a claim ("I'm not sure, but it opened in 1932") is an answer, not a refusal.
    """
    match = _abstention_match(text)
    return match is not None and _hedged_claim_text(text, match) is None


def is_claimless(sentence: str, min_content_words: int = 2) -> bool:
    """A sentence that asserts nothing checkable: a question, a sentence with no content word (words
    outside the conversational filler list), or one with fewer than ``min_content_words`` that speaks
    of the speaker or the listener ("I like dogs.", "You're right.").

    A single content word is enough otherwise: "Paris.", "In 1889.", "It is a comedy.", "He was a
    mathematician." answer something (a RAG answer is often that short)."""
    stripped = sentence.strip()
    if stripped.endswith("?"):
        return True
    words = content_words(stripped)
    n = len(words)
    if n == 0 or (n < min_content_words and bool(_INTERLOCUTOR.search(stripped))):
        return True
    # Only words about the answer itself, its sources or the conversation: "Here's a concise
    # summary of the passage:", "I hope this helps!" (a sentence with a number or a name is content).
    return all(w in _META_WORDS or w in STOPWORDS for w in words)


def strip_frame(sentence: str) -> str:
    """The sentence without what frames it: opening connectives ("Additionally,", "In summary,")
    and attributions to the passage ("The passage states that", "According to the text,", "This
    document explains"), which no evidence contains. What remains is the claim."""
    out = sentence.strip()
    head, colon, rest = out.partition(":")
    # "Here's a summary of the passage: X" -- a lead-in that states nothing, then the claim
    if colon and rest.strip() and is_claimless(head):
        out = rest.strip()
    for _ in range(3):  # "In summary, according to the passage, X"
        stripped = _META_FRAME.sub("", _LEADING_CONNECTIVE.sub("", out)).strip()
        if stripped == out:
            break
        out = stripped
    if not out:
        return sentence.strip()
    return out[0].upper() + out[1:] if sentence[:1].isupper() and out[:1].islower() else out


def extract_claims(answer: str, split_conjunctions: bool = True) -> ExtractedClaims:
    """Split ``answer`` into atomic claims, or say why it has none.

    Returns kind ``"empty"`` for blank text, ``"abstention"`` for a refusal, ``"generic"`` when no
    sentence asserts anything checkable (greetings, agreement, open questions), else ``"claims"``
    with the claim-bearing sentences (or clauses) in order. A hedge before a claim is dropped and
    the claim kept; a question that presupposes a fact ("Did you know that X?") claims X.
    """
    if not answer or not answer.strip():
        return ExtractedClaims("empty", ())
    match = _abstention_match(answer)
    if match is not None:
        hedged = _hedged_claim_text(answer, match)
        if hedged is None:
            return ExtractedClaims("abstention", ())
        answer = hedged
    claims: list[str] = []
    for sentence in split_sentences(answer):
        presupposed = _PRESUPPOSING_QUESTION.search(sentence) if sentence.rstrip().endswith("?") else None
        if presupposed is not None and len(content_words(presupposed.group(1))) >= 3:
            sentence = presupposed.group(1).strip() + "."
        if is_claimless(sentence):
            continue
        sentence = strip_frame(sentence)
        if is_claimless(sentence):
            continue
        pieces = split_clauses(sentence) if split_conjunctions else [sentence]
        # A clause too thin to check on its own ("it is the capital") stays inside its sentence.
        claims.extend([sentence] if any(len(content_words(p)) < CLAUSE_MIN_CONTENT_WORDS for p in pieces)
                      else pieces)
    if not claims:
        return ExtractedClaims("generic", ())
    return ExtractedClaims("claims", tuple(claims))
