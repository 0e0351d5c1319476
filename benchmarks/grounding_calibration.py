"""Synthetic grounding claims built from HotpotQA: offline-6's fit set, kept as material.

Since offline-8 the support model is fitted on human-labelled claims (benchmarks/grounding_fit.py);
these synthetic claims are extra material there, weighing as much as one training set (the
leave-one-set-out comparison chose that over leaving them out or halving them, see docs/labellers.md).
The description below is of how offline-6 used them.

The grounding dev sets (BEGIN, WiCE) measure the labeller, and other human-labelled sets judge it,
so its weights must not be fitted to them. Instead, claims are synthesised from a different corpus
(HotpotQA paragraphs, which carry no grounding labels at all) with the errors a generator makes:

supported
    a sentence of a supporting paragraph; its first clause alone; a contiguous span of six or more
    words; the sentence with some (or a third of its) lower-case words dropped, clauses reordered;
    words swapped for synonyms with an adverb inserted (a rewording); its leading pronoun replaced by
    the paragraph's title; two sentences fused into one claim, from one paragraph or from both; the
    sentence framed as belief or reply ("I think ...", "Yes, ...": *hedged*, offline-6).
not supported
    the sentence with a number or year changed, a name swapped for one from an unretrieved
    paragraph, a negation inserted, an unsupported detail (a year, a name, a phrase) added, one
    content word swapped, a clause borrowed from an unretrieved paragraph, or its second half
    replaced by an unrelated sentence's; an unretrieved paragraph's sentence, as is or with its
    subject renamed to the supporting paragraph's title (a fabrication about the right entity);
    the speaker's own experience or taste about a name of the passage ("I'm from Los Angeles.":
    *persona*, offline-6).
not supported, written by a real small generator (offline-6)
    SmolLM2-135M-Instruct asked about the supporting paragraph's title without the paragraph
    (greedy): a short factual reply (*lm_closed_book*, first 250 questions) and a casual reply with
    its own opinion or experience (*lm_chat*, first 150). These are the extrinsic fabrications and
    persona replies that knowledge-grounded generators are known to produce, in a generator's own
    words rather than a rule's; see :func:`lm_synthetic` for their label noise. They are cached
    (``build/grounding-synthetic/``, never committed) and regenerated when missing.

Why offline-6 changed the synthetic set: the rule-made negatives are mostly one-edit perturbations
(a word, a name, a number), where word pairs matter most; fabrications as generators write them
were missing, and so were hedged positives and persona negatives. These were chosen from the
literature on hallucination in knowledge-grounded dialogue (personal experience and extrinsic
detail are its commonest forms), not fitted to BEGIN or WiCE; a few BEGIN responses read while
looking for bugs ("I 'm from Los Angeles , California , where they formed in 1985") showed the
persona case too, which is recorded here rather than hidden.

Evidence is the question's two supporting paragraphs plus two of its distractor paragraphs (a
retriever's top 4); the paragraph the negatives borrow from is never among them. Negated sentences
are synthesised (they test the contradiction check) but left out of the support fit, since no
support feature can see a negation.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

from ragtrace_evaluator.labellers.claims import split_sentences
from ragtrace_evaluator.labellers.lexical import STOPWORDS
from ragtrace_evaluator.labellers.protocol import Passage

_AUX = re.compile(r"\b(is|was|are|were|has|had|can|will|does|did)\b")
_NUM = re.compile(r"\b\d{1,4}\b")
_CAP = re.compile(r"(?<=\s)[A-Z][a-z]{2,}")


def _perturb_number(sentence: str, rng: random.Random) -> str | None:
    nums = list(_NUM.finditer(sentence))
    if not nums:
        return None
    m = rng.choice(nums)
    value = int(m.group())
    new = value + rng.choice([-1, 1]) * rng.randint(1, 12) if 1000 <= value <= 2099 else value + rng.randint(1, 9)
    return sentence[:m.start()] + str(max(new, 0)) + sentence[m.end():]


def _perturb_name(sentence: str, other: str, rng: random.Random) -> str | None:
    mine = list(_CAP.finditer(sentence))
    theirs = [m.group() for m in _CAP.finditer(other) if m.group() not in sentence]
    if not mine or not theirs:
        return None
    m = rng.choice(mine)
    return sentence[:m.start()] + rng.choice(theirs) + sentence[m.end():]


def _negate(sentence: str) -> str | None:
    m = _AUX.search(sentence)
    if not m:
        return None
    return sentence[:m.end()] + " not" + sentence[m.end():]


def _first_clause(sentence: str) -> str | None:
    head = sentence.split(",")[0].strip()
    return head if len(head.split()) >= 5 and head != sentence.strip() else None


def _drop_words(sentence: str, rng: random.Random) -> str | None:
    words = sentence.split()
    droppable = [i for i, w in enumerate(words) if i > 0 and w.islower() and not any(c.isdigit() for c in w)
                 and len(w) > 3]
    if len(droppable) < 3:
        return None
    drop = set(rng.sample(droppable, max(1, len(droppable) // 5)))
    return " ".join(w for i, w in enumerate(words) if i not in drop)


def _reorder(sentence: str) -> str | None:
    parts = [p.strip() for p in sentence.rstrip(".").split(",") if p.strip()]
    if len(parts) < 2:
        return None
    return f"{parts[-1][0].upper()}{parts[-1][1:]}, {', '.join(parts[:-1])}."


def _fuse(first: str, second: str) -> str:
    return f"{first.rstrip('.')}, and {second[0].lower()}{second[1:]}"


_PRONOUN_START = re.compile(r"^(?:He|She|It|They|The (?:film|band|album|song|company|book|city|town|game|show))\b")
_WORDS = re.compile(r"[A-Za-z][a-z]{3,}")


def _resolve_pronoun(sentence: str, title: str) -> str | None:
    """"He was born in 1950." → "John Smith was born in 1950.": claims name what the passage
    refers to by a pronoun (the passage's title names it)."""
    m = _PRONOUN_START.match(sentence)
    if not m or not title:
        return None
    return title + sentence[m.end():]


def _paraphrase(sentence: str, rng: random.Random) -> str | None:
    """A looser restatement: a third of the droppable words gone, clauses reordered when possible."""
    words = sentence.split()
    droppable = [i for i, w in enumerate(words) if i > 0 and w.islower() and not any(c.isdigit() for c in w)
                 and len(w) > 2]
    if len(droppable) < 4:
        return None
    drop = set(rng.sample(droppable, max(2, len(droppable) // 3)))
    shorter = " ".join(w for i, w in enumerate(words) if i not in drop)
    return _reorder(shorter) or shorter


def _span(sentence: str, rng: random.Random) -> str | None:
    """A contiguous stretch of at least six words (extractive answers copy fragments)."""
    words = sentence.rstrip(".").split()
    if len(words) < 10:
        return None
    length = rng.randint(6, len(words) - 3)
    start = rng.randint(0, len(words) - length)
    return " ".join(words[start:start + length]) + "."


# Common rewordings a generator makes; each side is a plain content word or phrase.
_SYNONYMS = {
    "film": "movie", "movie": "film", "began": "started", "started": "began", "founded": "established",
    "established": "founded", "located": "situated", "largest": "biggest", "known": "famous",
    "famous": "well known", "died": "passed away", "received": "got", "won": "earned", "released": "put out",
    "created": "made", "written": "penned", "directed": "helmed", "city": "town", "company": "firm",
    "several": "many", "also": "additionally", "named": "called", "called": "named", "produced": "made",
    "award": "prize", "member": "part", "originally": "first", "formed": "founded", "worked": "served",
}
_FILLERS = ("actually", "originally", "really", "famously", "eventually", "notably", "later", "widely")


def _reword(sentence: str, rng: random.Random) -> str | None:
    """A reworded restatement: up to two words swapped for a synonym and an adverb inserted, as a
    generator paraphrases (coverage and word pairs drop although the fact is unchanged)."""
    words = sentence.split()
    spots = [i for i, w in enumerate(words) if w.lower().strip(",.") in _SYNONYMS]
    if not spots:
        return None
    for i in rng.sample(spots, min(2, len(spots))):
        core = words[i].lower().strip(",.")
        words[i] = words[i].lower().replace(core, _SYNONYMS[core])
    if len(words) > 4:
        words.insert(rng.randint(1, len(words) - 2), rng.choice(_FILLERS))
    return " ".join(words)


def _added_detail(sentence: str, donor: str, rng: random.Random) -> str | None:
    """The sentence with one unsupported detail appended: a name, a year or a phrase taken from
    another paragraph (partial support: everything else is in the evidence)."""
    names = [m.group() for m in _CAP.finditer(donor) if m.group() not in sentence]
    options = [f" in {rng.randint(1900, 2015)}"]
    if names:
        options += [f" with {rng.choice(names)}", f" in {rng.choice(names)}"]
    donor_words = donor.rstrip(".").split()
    if len(donor_words) >= 8:
        start = rng.randint(0, len(donor_words) - 4)
        options.append(", " + " ".join(donor_words[start:start + 4]))
    return sentence.rstrip(". ") + rng.choice(options) + "."


_HEDGES = ("I think ", "I believe ", "I heard that ", "I know that ", "Yes, ", "Well, ", "Actually, ")


def _hedge(sentence: str, rng: random.Random) -> str:
    """The sentence framed as the speaker's belief or as a reply ("I think X", "Yes, X"): generators
    hedge and converse; the frame adds no fact, so the claim is as supported as X."""
    first = sentence.split(" ", 1)[0]
    head = first.lower() if first.lower() in STOPWORDS else first  # "The ..." → "the ...", "Paris" stays
    return rng.choice(_HEDGES) + head + sentence[len(first):]


_PERSONA = ("I have been to {name}.", "I'm from {name}.", "I met {name} once.", "I grew up near {name}.",
            "My favourite is {name}.", "I love {name}.", "I worked with {name} for years.")


def _persona(sentence: str, title: str, rng: random.Random) -> str | None:
    """The speaker's own experience or taste about something the passage names ("I'm from Los
    Angeles."): generators in conversation invent a persona; its words may all be in the evidence,
    yet no passage says anything about the speaker."""
    names = [m.group() for m in _CAP.finditer(" " + sentence)] + ([title] if title else [])
    return rng.choice(_PERSONA).format(name=rng.choice(names)) if names else None


def _swap_word(sentence: str, donor: str, rng: random.Random) -> str | None:
    """One lower-case content word replaced by a content word of another paragraph."""
    mine = [m for m in _WORDS.finditer(sentence) if m.group().islower() and m.start() > 0]
    theirs = [w for w in _WORDS.findall(donor) if w.islower() and w not in sentence]
    if not mine or not theirs:
        return None
    m = rng.choice(mine)
    return sentence[:m.start()] + str(rng.choice(theirs)) + sentence[m.end():]


def _topic_shift(donor_sentence: str, title: str) -> str | None:
    """A sentence about another subject with that subject renamed to the passage's: a fabrication
    that names the right entity."""
    m = _CAP.search(" " + donor_sentence)
    if not m or not title or title in donor_sentence:
        return None
    start, end = m.start() - 1, m.end() - 1
    return donor_sentence[:start] + title + donor_sentence[end:]


def _half_and_half(sentence: str, donor_sentence: str) -> str | None:
    """The first half of a supported sentence finished by the second half of an unrelated one."""
    a, b = sentence.rstrip(".").split(), donor_sentence.rstrip(".").split()
    if len(a) < 8 or len(b) < 8:
        return None
    return " ".join(a[: len(a) // 2] + b[len(b) // 2:]) + "."


def synthesise(path: Path, seed: int = 7, max_questions: int = 500) -> list[tuple[str, list[Passage], int, str]]:
    """(claim, evidence passages, label, kind) rows from a HotpotQA-style JSONL file.

    Evidence is the two supporting paragraphs plus two distractor paragraphs (a retriever's top 4);
    the paragraph that not-supported claims borrow from is never among them."""
    rng = random.Random(seed)
    rows: list[tuple[str, list[Passage], int, str]] = []
    with open(path, encoding="utf-8") as fh:
        questions = [json.loads(line) for line in fh][:max_questions]
    for q in questions:
        gold = [c for c in q["contexts"] if c.get("is_supporting")]
        other = [c for c in q["contexts"] if not c.get("is_supporting")]
        if not gold or len(other) < 3:
            continue
        rng.shuffle(other)
        donor_ctx, retrieved = other[0], other[1:3]
        passages = [Passage(c["id"], c["paragraph_text"]) for c in gold + retrieved]
        source = rng.choice(gold)
        sentences = [s for s in split_sentences(source["paragraph_text"]) if len(s.split()) >= 7]
        if not sentences:
            continue
        s = rng.choice(sentences)
        distractor = donor_ctx["paragraph_text"]
        d_sentences = [x for x in split_sentences(distractor) if len(x.split()) >= 6] or [distractor]
        d = rng.choice(d_sentences)
        title = source.get("title", "")
        candidates: list[tuple[str | None, int, str]] = [
            (s, 1, "exact"), (_first_clause(s), 1, "first_clause"), (_drop_words(s, rng), 1, "dropped_words"),
            (_perturb_number(s, rng), 0, "number"), (_perturb_name(s, distractor, rng), 0, "name"),
            (_negate(s), 0, "negation"), (f"{s.rstrip('.')}, and {d[0].lower()}{d[1:]}", 0, "borrowed_clause"),
            (d, 0, "distractor_sentence"), (_reorder(s), 1, "reordered"),
            (_paraphrase(s, rng), 1, "paraphrase"), (_reword(s, rng), 1, "reworded"),
            (_span(s, rng), 1, "extractive_span"), (_hedge(s, rng), 1, "hedged"),
            (_resolve_pronoun(s, title), 1, "pronoun_resolved"),
            (_added_detail(s, distractor, rng), 0, "added_detail"), (_swap_word(s, distractor, rng), 0, "swapped_word"),
            (_topic_shift(d, title), 0, "topic_shift"), (_half_and_half(s, d), 0, "half_and_half"),
            (_persona(s, title, rng), 0, "persona"),
        ]
        others = [x for x in sentences if x != s]
        if others:
            candidates.append((_fuse(s, rng.choice(others)), 1, "fused"))
        second = [c for c in gold if c is not source]
        if second:
            t_sentences = [x for x in split_sentences(second[0]["paragraph_text"]) if len(x.split()) >= 6]
            if t_sentences:
                head = _first_clause(s) or s
                candidates.append((_fuse(head, rng.choice(t_sentences)), 1, "cross_passage_fused"))
        rows.extend((c, passages, label, kind) for c, label, kind in candidates if c)
    return rows


# -- a real small generator's fabrications --------------------------------------------------------

#: prompts for SmolLM2-135M-Instruct, which is asked about a paragraph's title *without* the paragraph
#: (closed book): what it writes is fluent, on the right subject, and almost never what the paragraph
#: says ("Carlo Rovelli was a legendary Italian film director ..."): the extrinsic fabrications and the
#: persona/opinion replies that knowledge-grounded generators are known to produce.
LM_PROMPTS = {
    "closed_book": "Tell me something interesting about {title} in one or two sentences.",
    "chat": "We are chatting about {title}. Reply in one or two casual sentences with your own opinion or experience.",
}
#: how many questions (the first N of the file) get a generation of each kind
LM_LIMITS = {"closed_book": 250, "chat": 150}
LM_MAX_NEW_TOKENS = 48
_COMPLETE = re.compile(r"[.!?][\"')\]]*$")


def lm_generations(path: Path, cache: Path, generate: bool = True) -> dict[tuple[str, str], str]:
    """``{(kind, question id): text}``: SmolLM2's greedy closed-book replies about each question's first
    supporting paragraph's title, read from ``cache`` (JSONL) and generated (then appended) when missing.

    Greedy decoding makes the generation reproducible; the cache only saves time (~2-6 s a reply on
    two cores). With ``generate=False`` only the cached replies are used."""
    with open(path, encoding="utf-8") as fh:
        questions = [json.loads(line) for line in fh]
    done: dict[tuple[str, str], str] = {}
    if cache.exists():
        for line in cache.read_text(encoding="utf-8").split("\n"):  # not splitlines(): U+2028 is text
            if not line.strip():
                continue
            row = json.loads(line)
            done[(row["kind"], row["question_id"])] = row["text"]
    todo = [(kind, q) for kind, limit in LM_LIMITS.items() for q in questions[:limit]
            if (kind, q["question_id"]) not in done]
    if todo and generate:
        from ragtrace_evaluator.labellers.erag import CausalLMReader

        reader = CausalLMReader("smollm2", max_new_tokens=LM_MAX_NEW_TOKENS)
        reader._load()
        tok, lm, torch = reader._tok, reader._lm, reader._torch
        cache.parent.mkdir(parents=True, exist_ok=True)
        with open(cache, "a", encoding="utf-8") as out:
            for kind, q in todo:
                title = next(c["title"] for c in q["contexts"] if c.get("is_supporting"))
                enc = tok.apply_chat_template([{"role": "user", "content": LM_PROMPTS[kind].format(title=title)}],
                                              add_generation_prompt=True, return_tensors="pt", return_dict=True)
                with torch.inference_mode():
                    ids = lm.generate(**enc, max_new_tokens=LM_MAX_NEW_TOKENS, do_sample=False,
                                      pad_token_id=tok.pad_token_id)
                text = tok.decode(ids[0, enc["input_ids"].shape[1]:], skip_special_tokens=True).strip()
                done[(kind, q["question_id"])] = text
                out.write(json.dumps({"kind": kind, "question_id": q["question_id"], "title": title,
                                      "text": text}) + "\n")
    return done


def lm_synthetic(path: Path, seed: int, cache: Path,
                 generate: bool = True) -> list[tuple[str, list[Passage], int, str]]:
    """Not-supported rows from SmolLM2's closed-book replies (kinds ``lm_closed_book`` and ``lm_chat``):
    each complete sentence of a reply, as the claim extractor splits it, against the question's two
    supporting paragraphs plus two distractors (the same evidence layout as :func:`synthesise`).

    The labels are "not supported" without a check: a reply written without the paragraph may
    happen to repeat it ("Shirley Temple was an American actress"). That noise is accepted and
    stated; dropping such claims by the labeller's own features would make the fit circular."""
    from ragtrace_evaluator.labellers.claims import extract_claims

    generations = lm_generations(path, cache, generate=generate)
    rng = random.Random(seed)
    rows: list[tuple[str, list[Passage], int, str]] = []
    with open(path, encoding="utf-8") as fh:
        questions = [json.loads(line) for line in fh]
    for qi, q in enumerate(questions):
        gold = [c for c in q["contexts"] if c.get("is_supporting")]
        other = [c for c in q["contexts"] if not c.get("is_supporting")]
        rng.shuffle(other)
        passages = [Passage(c["id"], c["paragraph_text"]) for c in gold + other[:2]]
        for kind in LM_PROMPTS:
            # only the first LM_LIMITS[kind] questions: a larger cache must not change the fit
            text = generations.get((kind, q["question_id"])) if qi < LM_LIMITS[kind] else None
            if not text:
                continue
            sentences = [x for x in split_sentences(text) if _COMPLETE.search(x)]  # drop a cut-off tail
            extracted = extract_claims(" ".join(sentences))
            rows.extend((c, passages, 0, f"lm_{kind}") for c in extracted.claims)
    return rows
