"""Training material for the entailment model: the licensed NLI files, weighted, plus rule-made near-copies.

What ships is trained only on data whose licence allows redistribution and commercial use
(``SHIPPABLE``). The other files of ``nli-train`` (ANLI and SICK are non-commercial, RTE is for
research, COVID-Fact states no licence) are listed in ``EXPERIMENT_ONLY`` and can be mixed in with
``--experiment-data`` for a run whose artefact is never shipped; the exporter refuses such a run.

Why the weights: FEVER is 61% of the pairs and 73% entailment, SNLI and SICK are image captions.
Pooled blindly, the model would learn FEVER's class prior and captions' cues. Each epoch therefore
draws a fixed number of pairs per source and class (``EPOCH_QUOTA``), rotating through FEVER so every
FEVER pair is seen over the run without FEVER outweighing the rest in any epoch.

Why near-copies: word overlap cannot tell "born in 1943" from "born in 1947". A hypothesis copied
from its premise (entailment) beside the same copy with one number, date, name or negation changed
(contradiction, or "not entailment" when the premise may not settle it) is exactly the contrast the
model has to learn, and it is a minority share of each epoch so it cannot become the whole task.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

#: class targets: the three NLI classes, or "not_entailment" (binary: only P(entailment) is pushed down)
LABELS = ("entailment", "neutral", "contradiction")
NOT_ENTAILMENT = "not_entailment"


@dataclass(frozen=True)
class Source:
    file: str
    licence: str
    shippable: bool


SOURCES = {
    "fever": Source("fever_train.jsonl", "CC BY-SA 3.0 (FEVER, Wikipedia-derived)", True),
    "mnli": Source("mnli_hw_train.jsonl", "MultiNLI: OANC (free) with CC BY-SA 3.0 / CC BY 3.0 parts", True),
    "snli": Source("snli_dev.jsonl", "CC BY-SA 4.0 (SNLI)", True),
    "anli": Source("anli_dev_NC.jsonl", "CC BY-NC 4.0 (non-commercial)", False),
    "sick": Source("sick_train.jsonl", "CC BY-NC-SA 3.0 (non-commercial)", False),
    "rte": Source("rte_train.jsonl", "research use only (RTE via GLUE)", False),
    "covidfact": Source("covidfact_all.jsonl", "no licence stated", False),
}
SHIPPABLE = tuple(k for k, s in SOURCES.items() if s.shippable)
EXPERIMENT_ONLY = tuple(k for k, s in SOURCES.items() if not s.shippable)

#: held out: never trained on, used to check the model learned entailment
CHECK_SETS = {"mnli_hw_val": "mnli_hw_val.jsonl", "snli_test": "snli_test.jsonl"}

#: pairs drawn per epoch, per source and class. FEVER has no neutral class.
EPOCH_QUOTA: dict[str, dict[str, int]] = {
    "fever": {"entailment": 14000, "contradiction": 14000},
    "mnli": {"entailment": 6709, "neutral": 6645, "contradiction": 6645},  # all of it, every epoch
    "snli": {"entailment": 3327, "neutral": 3235, "contradiction": 3278},  # all of it, every epoch
    "anli": {"entailment": 1070, "neutral": 1068, "contradiction": 1062},
    "sick": {"entailment": 1417, "neutral": 1400, "contradiction": 712},
    "rte": {"entailment": 627, NOT_ENTAILMENT: 616},
    "covidfact": {"entailment": 1291, "contradiction": 1291},
}
#: near-copy pairs per epoch (about a seventh of a shippable epoch: a minority share)
NEAR_COPIES_PER_EPOCH = 11000


@dataclass(frozen=True)
class Pair:
    premise: str
    hypothesis: str
    label: str  # one of LABELS or NOT_ENTAILMENT
    source: str


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_pairs(path: Path, source: str) -> list[Pair]:
    out = []
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                label = str(row["label"])
                pair = Pair(str(row["premise"]), str(row["hypothesis"]), label, source)
            except (ValueError, KeyError) as exc:
                raise ValueError(f"{path}:{n}: not a premise/hypothesis/label row ({exc})") from exc
            if label not in LABELS and label != NOT_ENTAILMENT:
                raise ValueError(f"{path}:{n}: unknown label {label!r}")
            out.append(pair)
    return out


class TrainingData:
    """The chosen sources, read once; ``epoch(k)`` is the same list of pairs for the same seed and k."""

    def __init__(self, data_dir: Path, sources: Iterable[str], seed: int = 13,
                 scale: dict[str, float] | None = None) -> None:
        """``scale`` multiplies a source's ``EPOCH_QUOTA`` (and ``near-copies`` their count): a second stage
        that leans on one source without touching the others' class balance."""
        self.data_dir = data_dir
        self.scale = dict(scale or {})
        unknown_scaled = sorted(set(self.scale) - set(SOURCES) - {"near-copies"})
        if unknown_scaled:
            raise ValueError(f"cannot scale {unknown_scaled}: known are {sorted(SOURCES)} and near-copies")
        self.sources = tuple(sources)
        unknown = [s for s in self.sources if s not in SOURCES]
        if unknown:
            raise ValueError(f"unknown sources {unknown}; known: {sorted(SOURCES)}")
        self.seed = seed
        self.by_source: dict[str, dict[str, list[Pair]]] = {}
        for name in self.sources:
            rows = read_pairs(data_dir / SOURCES[name].file, name)
            classes: dict[str, list[Pair]] = {}
            for p in rows:
                classes.setdefault(p.label, []).append(p)
            self.by_source[name] = classes
        # Near-copies are made from entailed pairs of the shippable sources only, so a shippable
        # run never sees text from elsewhere.
        self.copy_seeds = [p for name in self.sources if SOURCES[name].shippable
                           for p in self.by_source[name].get("entailment", [])]

    def manifest(self) -> list[dict[str, str]]:
        return [{"file": SOURCES[s].file, "sha256": file_sha256(self.data_dir / SOURCES[s].file),
                 "licence": SOURCES[s].licence, "shippable": str(SOURCES[s].shippable).lower()}
                for s in self.sources]

    @property
    def shippable(self) -> bool:
        return all(SOURCES[s].shippable for s in self.sources)

    def epoch(self, k: int) -> list[Pair]:
        rng = random.Random(f"{self.seed}:{k}")
        pairs: list[Pair] = []
        for name in self.sources:
            for label, quota in EPOCH_QUOTA[name].items():
                pool = self.by_source[name].get(label, [])
                if not pool:
                    continue
                quota = round(quota * self.scale.get(name, 1.0))
                pairs.extend(_rotating_draw(pool, quota, k, f"{self.seed}:{name}:{label}"))
        pairs.extend(near_copies(self.copy_seeds, round(NEAR_COPIES_PER_EPOCH * self.scale.get("near-copies", 1.0)),
                                 rng))
        rng.shuffle(pairs)
        return pairs


def _rotating_draw(pool: list[Pair], quota: int, k: int, key: str) -> list[Pair]:
    """Epoch k's share of one fixed permutation of ``pool``: consecutive epochs see different pairs."""
    order = list(range(len(pool)))
    random.Random(key).shuffle(order)
    start = (k * quota) % len(pool)
    idx = [order[(start + i) % len(pool)] for i in range(quota)]  # a quota above the pool repeats it
    return [pool[i] for i in idx]


def read_check_set(data_dir: Path, name: str) -> list[Pair]:
    return read_pairs(data_dir / CHECK_SETS[name], name)


# ---- near-copies ---------------------------------------------------------------------------------

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
_NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(?![\w])")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
           "October", "November", "December")
_MONTH = re.compile(r"\b(" + "|".join(_MONTHS) + r")\b")
# A run of capitalised words that does not start the sentence: a name, a place, a title.
_NAME = re.compile(r"(?<=[a-z,;:] )((?:[A-Z][a-z]+(?:[-'][A-Z]?[a-z]+)?)(?: (?:[A-Z][a-z]+|of|de|von|van))*)")
_AUX = re.compile(r"\b(is|was|are|were|has|have|had|can|could|will|would|should|does|did|do)\b")
_NEG = re.compile(r"\b(is|was|are|were|has|have|had|can|could|will|would|should|does|did|do) not\b"
                  r"|\b(isn't|wasn't|aren't|weren't|hasn't|haven't|hadn't|can't|couldn't|won't|wouldn't"
                  r"|shouldn't|doesn't|didn't|don't)\b|\bnever\b")
_CONTRACTIONS = {"isn't": "is", "wasn't": "was", "aren't": "are", "weren't": "were", "hasn't": "has",
                 "haven't": "have", "hadn't": "had", "can't": "can", "couldn't": "could", "won't": "will",
                 "wouldn't": "would", "shouldn't": "should", "doesn't": "does", "didn't": "did", "don't": "do"}


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if len(s.strip()) > 20]


def change_number(text: str, rng: random.Random) -> str | None:
    found = list(_NUMBER.finditer(text))
    if not found:
        return None
    m = rng.choice(found)
    raw = m.group(1)
    value = float(raw.replace(",", ""))
    if "." in raw:
        new = f"{value * rng.choice((0.5, 0.8, 1.3, 2.0)):.{len(raw.split('.')[1])}f}"
    elif 1000 <= value <= 2100 and "," not in raw:  # a year
        new = str(int(value) + rng.choice((-11, -7, -3, -2, -1, 1, 2, 3, 5, 9)))
    else:
        iv = int(value)
        choices = [iv + d for d in (-3, -2, -1, 1, 2, 5, 10) if iv + d >= 0] + [iv * 2, iv * 10]
        new_int = rng.choice([c for c in choices if c != iv])
        new = f"{new_int:,}" if "," in raw else str(new_int)
    if new == raw:
        return None
    return text[:m.start(1)] + new + text[m.end(1):]


def change_month(text: str, rng: random.Random) -> str | None:
    found = list(_MONTH.finditer(text))
    if not found:
        return None
    m = rng.choice(found)
    new = rng.choice([x for x in _MONTHS if x != m.group(1)])
    return text[:m.start(1)] + new + text[m.end(1):]


def flip_negation(text: str, rng: random.Random) -> str | None:
    neg = _NEG.search(text)
    if neg:  # remove the negation
        word = neg.group(0)
        if word == "never":
            repl = "once"
        elif word.endswith(" not"):
            repl = word[:-4]
        else:
            repl = _CONTRACTIONS[word]
        return text[:neg.start()] + repl + text[neg.end():]
    aux = list(_AUX.finditer(text))
    if not aux:
        return None
    m = aux[0]
    return text[:m.end()] + " not" + text[m.end():]


def swap_name(text: str, premise: str, others: list[str], rng: random.Random) -> str | None:
    found = [m for m in _NAME.finditer(text) if len(m.group(1)) > 3]
    if not found:
        return None
    m = rng.choice(found)
    for _ in range(8):
        donor = rng.choice(others)
        names = [d.group(1) for d in _NAME.finditer(donor) if len(d.group(1)) > 3]
        names = [n for n in names if n not in premise and n != m.group(1)]
        if names:
            return text[:m.start(1)] + rng.choice(names) + text[m.end(1):]
    return None


_KIND_WEIGHTS = {"number": 4, "month": 3, "negation": 2, "name": 2}


def near_copies(seeds: list[Pair], n: int, rng: random.Random) -> list[Pair]:
    """``n`` pairs, half copies (entailment) and half changed copies of the same kind of text.

    A copy is a premise sentence (or the entailed hypothesis itself) against its premise. Its change is
    one number, month, negation or name. A changed number, month or negation of a sentence the premise
    states is a contradiction; a swapped name is only "not entailment" (the premise may say nothing
    about the new name), so only P(entailment) is pushed down for it.
    """
    if not seeds:
        return []
    out: list[Pair] = []
    hyps = [p.hypothesis for p in rng.sample(seeds, min(len(seeds), 2000))]
    tries = 0
    while len(out) < n and tries < n * 20:
        tries += 1
        seed = rng.choice(seeds)
        if rng.random() < 0.5:
            candidates = sentences(seed.premise)
            if not candidates:
                continue
            dated = [c for c in candidates if _NUMBER.search(c) or _MONTH.search(c)]
            base = rng.choice(dated if dated and rng.random() < 0.7 else candidates)
        else:
            base = seed.hypothesis
        # Numbers and dates first when the text has them: they are the rarer and the more telling change.
        options = [k for k, w in _KIND_WEIGHTS.items() for _ in range(w)
                   if (k != "number" or _NUMBER.search(base)) and (k != "month" or _MONTH.search(base))]
        kind = rng.choice(options)
        if kind == "number":
            changed, label = change_number(base, rng), "contradiction"
        elif kind == "month":
            changed, label = change_month(base, rng), "contradiction"
        elif kind == "negation":
            changed, label = flip_negation(base, rng), "contradiction"
        else:
            changed, label = swap_name(base, seed.premise, hyps, rng), NOT_ENTAILMENT
        if not changed or changed == base:
            continue
        out.append(Pair(seed.premise, base, "entailment", f"near-copy:{seed.source}"))
        out.append(Pair(seed.premise, changed, label, f"near-copy-{kind}:{seed.source}"))
    return out[:n]


def batches_by_length(pairs: list[Pair], batch_size: int, rng: random.Random) -> Iterator[list[Pair]]:
    """Batches of similar length (less padding), in a shuffled order: sort within windows of 50 batches."""
    window = batch_size * 50
    out: list[list[Pair]] = []
    for start in range(0, len(pairs), window):
        chunk = sorted(pairs[start:start + window], key=lambda p: len(p.premise) + len(p.hypothesis))
        out.extend(chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size))
    rng.shuffle(out)
    yield from out
