"""A synthetic corpus whose ground truth is written in the same pass as the text.

Every document is a short profile of a synthetic entity (a company, a researcher or a town):
an introductory sentence that names it, then fact sentences that refer back to it ("It", "The
company", "She") — the way short encyclopaedia entries read. Each fact carries numbers, dates or
names. Entities come in *families* that share a name root ("Velmora Dynamics", "Velmora
Logistics"; "Ilse Varga", "Oren Varga") and state the same kinds of facts with different values,
so every family member is a hard distractor for its siblings' questions: it shares the entity
words and the sentence wording, and states a different fact.

Golden questions paraphrase the fact (they avoid the evidence sentence's content words), so
lexical retrieval finds the document through the entity name and a dense reranker has to do real
work. For each question the generator records the answering document, the character span of the
evidence sentence and of the answer value, the reference answer and the hard distractors —
provenance for every label, not a later annotation.

Deterministic by seed: the same ``(n_docs, seed)`` gives byte-identical output.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Corpus", "Document", "Fact", "GoldenQuestion", "generate_corpus", "load_corpus"]

FORMAT_VERSION = 1


@dataclass(frozen=True)
class Fact:
    """One fact sentence of a document. Offsets are character offsets into ``Document.text``."""

    relation: str
    value: str  # the answer value as written in the text
    sentence_start: int
    sentence_end: int
    value_start: int
    value_end: int


@dataclass(frozen=True)
class Document:
    id: str
    title: str  # the entity name
    kind: str  # "company" | "person" | "town"
    family: str  # the shared name root; siblings are hard distractors for each other
    text: str
    #: character offset where each sentence starts (the intro is sentence 0)
    sentence_starts: tuple[int, ...]
    facts: tuple[Fact, ...]

    def sentences(self) -> list[str]:
        bounds = [*self.sentence_starts, len(self.text)]
        return [self.text[a:b].strip() for a, b in itertools.pairwise(bounds)]


@dataclass(frozen=True)
class GoldenQuestion:
    id: str
    question: str
    doc_id: str  # the answering document
    relation: str
    answer: str  # the short reference answer (the value)
    reference: str  # the evidence sentence, a full reference answer
    evidence_start: int  # span of the evidence sentence in the document
    evidence_end: int
    answer_start: int  # span of the answer value in the document
    answer_end: int
    #: siblings stating the same relation with a different value
    hard_distractors: tuple[str, ...] = ()


@dataclass(frozen=True)
class Corpus:
    seed: int
    documents: tuple[Document, ...]
    questions: tuple[GoldenQuestion, ...]
    _by_id: dict[str, Document] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._by_id.update({d.id: d for d in self.documents})

    def document(self, doc_id: str) -> Document:
        try:
            return self._by_id[doc_id]
        except KeyError:
            raise KeyError(f"no document {doc_id!r} in this corpus") from None

    def question(self, query_id: str) -> GoldenQuestion:
        for q in self.questions:
            if q.id == query_id:
                return q
        raise KeyError(f"no golden question {query_id!r} in this corpus")

    # --- persistence ------------------------------------------------------------------------
    def evidence_spans(self) -> list[dict[str, Any]]:
        """Each question's evidence sentence as a span of its document, in the JSON Lines shape
        ``ragtrace labels import`` reads: gold that holds for any chunking of the corpus."""
        return [{"query_id": q.id, "source_id": q.doc_id, "start": q.evidence_start, "end": q.evidence_end}
                for q in self.questions]

    def save(self, folder: str | Path) -> Path:
        """Write ``documents.jsonl``, ``questions.jsonl``, ``qrels.txt`` (TREC, by document id: the
        chunk ids of an unsplit build), ``evidence.jsonl`` (evidence spans) and ``corpus.json``."""
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        with open(out / "documents.jsonl", "w", encoding="utf-8") as fh:
            for d in self.documents:
                fh.write(json.dumps(asdict(d), ensure_ascii=False) + "\n")
        with open(out / "questions.jsonl", "w", encoding="utf-8") as fh:
            for q in self.questions:
                fh.write(json.dumps(asdict(q), ensure_ascii=False) + "\n")
        with open(out / "qrels.txt", "w", encoding="utf-8") as fh:
            for q in self.questions:
                fh.write(f"{q.id} 0 {q.doc_id} 1\n")
        with open(out / "evidence.jsonl", "w", encoding="utf-8") as fh:
            for span in self.evidence_spans():
                fh.write(json.dumps(span) + "\n")
        meta = {"format": FORMAT_VERSION, "seed": self.seed, "documents": len(self.documents),
                "questions": len(self.questions)}
        (out / "corpus.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        return out


def load_corpus(folder: str | Path) -> Corpus:
    """Read a corpus written by `Corpus.save`."""
    src = Path(folder)
    meta_path = src / "corpus.json"
    if not meta_path.exists():
        raise FileNotFoundError(f"{src} holds no corpus.json: write one with generate_corpus(...).save()")
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    if meta.get("format") != FORMAT_VERSION:
        raise ValueError(f"{meta_path}: corpus format {meta.get('format')}, this code reads {FORMAT_VERSION}")
    docs = []
    # JSON Lines end at "\n" only: str.splitlines() would also break at U+2028 inside a passage
    for line in filter(str.strip, (src / "documents.jsonl").read_text(encoding="utf-8").split("\n")):
        raw = json.loads(line)
        raw["sentence_starts"] = tuple(raw["sentence_starts"])
        raw["facts"] = tuple(Fact(**f) for f in raw["facts"])
        docs.append(Document(**raw))
    questions = []
    for line in filter(str.strip, (src / "questions.jsonl").read_text(encoding="utf-8").split("\n")):
        raw = json.loads(line)
        raw["hard_distractors"] = tuple(raw["hard_distractors"])
        questions.append(GoldenQuestion(**raw))
    return Corpus(seed=int(meta["seed"]), documents=tuple(docs), questions=tuple(questions))


# --- vocabulary ---------------------------------------------------------------------------------
_ONSETS = ["b", "br", "c", "d", "dr", "f", "g", "gr", "h", "k", "kr", "l", "m", "n", "p", "pr", "r", "s",
           "st", "t", "tr", "v", "z", "sk", "th", "w"]
_VOWELS = ["a", "e", "i", "o", "u", "ae", "ia", "ou"]
_CODAS = ["", "", "n", "r", "l", "s", "th", "nd", "sk", "m", "x", "rt"]
_FIRST = ["Ilse", "Oren", "Mara", "Tobias", "Anouk", "Ravi", "Selma", "Jonas", "Keiko", "Dario", "Femke",
          "Lukas", "Amara", "Bruno", "Ines", "Pavel", "Noor", "Elias", "Greta", "Mateo", "Yara", "Hugo",
          "Lena", "Omar", "Sunniva", "Teodor", "Wanda", "Viktor", "Esra", "Casper", "Maren", "Idris"]
# name suffix -> what the company does
_COMPANY_TRADE = {"Dynamics": "an engineering firm", "Logistics": "a freight operator",
                  "Biolabs": "a biotechnology firm", "Textiles": "a textile mill", "Foods": "a food processor",
                  "Mining": "a mining group", "Robotics": "a robotics manufacturer", "Shipping": "a shipping line",
                  "Optics": "an optics maker", "Ceramics": "a ceramics producer", "Energy": "a utility",
                  "Pharma": "a drug maker"}
_COMPANY_SUFFIX = list(_COMPANY_TRADE)
_FIELDS = ["marine biology", "glaciology", "number theory", "soil chemistry", "linguistics", "astrophysics",
           "epidemiology", "materials science", "ornithology", "volcanology"]
_PRIZES = ["Halvard", "Corrin", "Esterby", "Lindqvist", "Maraval", "Okonkwo", "Pellucid", "Quinlan",
           "Ravensholm", "Sattler", "Tovey", "Ulbrecht", "Varnum", "Wexley", "Ystad", "Zellweger"]
_INSTITUTES = ["Brennholt", "Cassava Point", "Dunmere", "Eskerfield", "Farrowgate", "Glimmerton",
               "Harwick", "Islay Ridge", "Jorvenstad", "Kellermark", "Lowther", "Morrowfield", "Northam",
               "Orrington", "Penhallow", "Quarrendon"]
_RIVERS = ["Oder", "Tamsin", "Verro", "Kessel", "Amber", "Lune", "Soren", "Dreva"]
_TOWN_PREFIX = ["", "Upper ", "Lower ", "North ", "South ", "Old ", "New "]
_TOWN_SUFFIX = ["", " Harbour", " Bridge", " Vale", " Crossing"]
_CITIES = ["Tarsk", "Obrun", "Helvik", "Marrowby", "Casteen", "Dunvale", "Pellau", "Rostavik", "Ardmoor",
           "Quillon", "Sendrik", "Valebrook", "Brackwater", "Corvana", "Deepmoor", "Eldhavn", "Fennick",
           "Galloway Cross", "Hightower", "Inverlith", "Junipera", "Kestrelby", "Lindenhall", "Mossgiel"]
_FILLERS = {
    "company": ["{Ref} sponsors an apprenticeship programme for school leavers.",
                "{Ref} publishes a yearly sustainability statement.",
                "{Ref} has been the subject of two trade press profiles."],
    "person": ["{Ref} also teaches an evening course for adults.",
               "{Ref} sits on the editorial board of a regional journal.",
               "{Ref} is known for careful fieldwork."],
    "town": ["{Ref} holds a market every second Saturday.",
             "{Ref} is twinned with a small port on the coast.",
             "{Ref} has a restored railway station from the last century."],
}
_REFS = {
    "company": ["It", "The company", "The firm"],
    "person": ["{pron}", "The researcher"],
    "town": ["It", "The town"],
}

# relation -> (evidence templates, question templates, value maker). Evidence templates mark the
# value with {v}; question templates avoid the evidence's content words on purpose.
_ValueMaker = Callable[[random.Random], str]


def _year(lo: int, hi: int) -> _ValueMaker:
    return lambda r: str(r.randint(lo, hi))


def _count(lo: int, hi: int, step: int = 1) -> _ValueMaker:
    return lambda r: f"{r.randrange(lo, hi, step):,}"


def _person_name(r: random.Random) -> str:
    return f"{r.choice(_FIRST)} {_root(r)}"


_RELATIONS: dict[str, dict[str, tuple[list[str], list[str], _ValueMaker]]] = {
    "company": {
        "founded": (["{Ref} was founded in {v}.", "{Ref} was incorporated in {v}."],
                    ["In what year did {name} begin operating?", "When did {name} start trading?"],
                    _year(1890, 2015)),
        "founder": (["{Ref} was set up by the engineer {v}.", "{Ref} traces its origins to the chemist {v}."],
                    ["Who created {name}?", "Which person is credited with starting {name}?"],
                    _person_name),
        "headquarters": (["{Ref} has its head office in {v}.", "{Ref} keeps its headquarters in {v}."],
                         ["Where is {name} based?", "In which city does {name} sit?"],
                         lambda r: r.choice(_CITIES)),
        "employees": (["{Ref} employs {v} staff.", "{Ref} has a workforce of {v}."],
                      ["How many people work for {name}?", "What is the headcount at {name}?"],
                      _count(40, 90000, 10)),
        "revenue": (["{Ref} reported annual revenue of {v} million euros.",
                     "{Ref} booked sales of {v} million euros in its latest accounts."],
                    ["How much money does {name} take in?", "What turnover does {name} report?"],
                    _count(3, 9000)),
        "ceo": (["{Ref} is led by chief executive {v}.", "{Ref} has been run by managing director {v}."],
                ["Who is in charge of {name} today?", "Who heads {name}?"],
                _person_name),
    },
    "person": {
        "born": (["{Ref} was born in {v}.", "{Ref} was born in the spring of {v}."],
                 ["What is the birth year of {name}?", "In which year did {name} come into the world?"],
                 _year(1931, 1996)),
        "prize": (["{Ref} received the {v} Prize.", "{Ref} was awarded the {v} Prize."],
                  ["Which honour did {name} win?", "What award went to {name}?"],
                  lambda r: r.choice(_PRIZES)),
        "institute": (["{Ref} works at the {v} Institute.", "{Ref} holds a chair at the {v} Institute."],
                      ["Where is {name} employed?", "Which organisation is {name} affiliated with?"],
                      lambda r: r.choice(_INSTITUTES)),
        "papers": (["{Ref} has published {v} papers.", "{Ref} is the author of {v} articles."],
                   ["How many publications does {name} have?", "What is the publication count of {name}?"],
                   _count(4, 420)),
        "advisor": (["{Ref} completed a doctorate under {v}.", "{Ref} trained under the supervision of {v}."],
                    ["Who mentored {name} during the PhD?", "Who was the doctoral mentor of {name}?"],
                    _person_name),
    },
    "town": {
        "population": (["{Ref} has a population of {v}.", "{Ref} is home to {v} inhabitants."],
                       ["How many residents live in {name}?", "How big is the populace of {name}?"],
                       _count(300, 250000, 10)),
        "settled": (["{Ref} was first settled in {v}.", "{Ref} received its charter in {v}."],
                    ["When did {name} come into existence?", "In what year did {name} begin?"],
                    _year(1120, 1890)),
        "mayor": (["{Ref} is governed by mayor {v}.", "{Ref} elected {v} as mayor."],
                  ["Who leads the council of {name}?", "Who is in charge of {name}?"],
                  _person_name),
        "elevation": (["{Ref} lies at an elevation of {v} metres.", "{Ref} sits {v} metres above sea level."],
                      ["What is the altitude of {name}?", "At what altitude is {name} located?"],
                      _count(2, 2400)),
    },
}


def _root(r: random.Random) -> str:
    word = r.choice(_ONSETS) + r.choice(_VOWELS) + r.choice(_ONSETS) + r.choice(_VOWELS) + r.choice(_CODAS)
    return word.capitalize()


@dataclass
class _Builder:
    r: random.Random
    used_names: set[str] = field(default_factory=set)
    used_roots: set[str] = field(default_factory=set)

    def fresh_root(self) -> str:
        while True:
            root = _root(self.r)
            if root not in self.used_roots and len(root) >= 5:
                self.used_roots.add(root)
                return root

    def family(self, kind: str, size: int) -> tuple[str, list[str]]:
        """The root and ``size`` distinct entity names sharing it."""
        root = self.fresh_root()
        names: list[str] = []
        while len(names) < size:
            if kind == "company":
                name = f"{root} {self.r.choice(_COMPANY_SUFFIX)}"
            elif kind == "person":
                name = f"{self.r.choice(_FIRST)} {root}"
            else:
                name = f"{self.r.choice(_TOWN_PREFIX)}{root}{self.r.choice(_TOWN_SUFFIX)}"
            if name not in self.used_names:
                self.used_names.add(name)
                names.append(name)
        return root, names

    def intro(self, kind: str, name: str) -> tuple[str, dict[str, str]]:
        if kind == "company":
            return f"{name} is {_COMPANY_TRADE[name.split()[-1]]}.", {}
        if kind == "person":
            pron = self.r.choice(["She", "He"])
            return f"{name} is a researcher in {self.r.choice(_FIELDS)}.", {"pron": pron}
        return f"{name} is a town on the {self.r.choice(_RIVERS)} river.", {}


def _sibling_values(r: random.Random, maker: _ValueMaker, n: int) -> list[str]:
    """``n`` pairwise different values, so siblings always disagree."""
    values: list[str] = []
    for _ in range(1000):
        if len(values) == n:
            break
        v = maker(r)
        if v not in values:
            values.append(v)
    if len(values) < n:  # tiny value sets (prizes, cities): allow repeats rather than loop forever
        values += [maker(r) for _ in range(n - len(values))]
    return values


def generate_corpus(n_docs: int = 200, *, seed: int = 0, n_questions: int | None = None,
                    family_size: tuple[int, int] = (2, 3)) -> Corpus:
    """Generate ``n_docs`` documents and golden questions (one per document unless ``n_questions``).

    ``family_size`` bounds how many entities share a name root (each is a hard distractor for the
    others). Raises ``ValueError`` for sizes below 2 documents.
    """
    if n_docs < 2:
        raise ValueError(f"n_docs={n_docs}: a corpus needs at least 2 documents (one plus a distractor)")
    lo, hi = family_size
    if not 1 <= lo <= hi:
        raise ValueError(f"family_size={family_size}: give (min, max) with 1 <= min <= max")
    r = random.Random(seed)
    b = _Builder(r)
    kinds = list(_RELATIONS)
    docs: list[Document] = []
    question_pool: list[tuple[Document, Fact, str]] = []  # (doc, fact asked about, name)
    families: dict[str, list[str]] = {}
    while len(docs) < n_docs:
        kind = kinds[len(docs) % len(kinds)] if r.random() < 0.7 else r.choice(kinds)
        size = min(r.randint(lo, hi), n_docs - len(docs))
        family, names = b.family(kind, size)
        relations = _RELATIONS[kind]
        # Siblings state the same relations with pairwise different values.
        values = {rel: _sibling_values(r, spec[2], size) for rel, spec in relations.items()}
        for i, name in enumerate(names):
            doc_id = f"d{len(docs):06d}"
            intro, ctx = b.intro(kind, name)
            text, starts, facts = _render(r, kind, intro, ctx, {rel: values[rel][i] for rel in relations})
            doc = Document(id=doc_id, title=name, kind=kind, family=family, text=text,
                           sentence_starts=starts, facts=tuple(facts))
            docs.append(doc)
            families.setdefault(f"{kind}:{family}", []).append(doc_id)
            asked = r.choice(facts)
            question_pool.append((doc, asked, name))
    by_family = {d.id: families[f"{d.kind}:{d.family}"] for d in docs}
    questions: list[GoldenQuestion] = []
    chosen: Iterable[tuple[Document, Fact, str]] = question_pool
    if n_questions is not None and n_questions < len(question_pool):
        chosen = sorted(r.sample(question_pool, n_questions), key=lambda t: t[0].id)
    for doc, fact, name in chosen:
        templates = _RELATIONS[doc.kind][fact.relation][1]
        questions.append(GoldenQuestion(
            id=f"q{len(questions):06d}", question=r.choice(templates).format(name=name), doc_id=doc.id,
            relation=fact.relation, answer=fact.value,
            reference=doc.text[fact.sentence_start:fact.sentence_end],
            evidence_start=fact.sentence_start, evidence_end=fact.sentence_end,
            answer_start=fact.value_start, answer_end=fact.value_end,
            hard_distractors=tuple(s for s in by_family[doc.id] if s != doc.id),
        ))
    return Corpus(seed=seed, documents=tuple(docs), questions=tuple(questions))


def _render(r: random.Random, kind: str, intro: str, ctx: dict[str, str],
            values: dict[str, str]) -> tuple[str, tuple[int, ...], list[Fact]]:
    """The document text: the intro names the entity; later sentences refer back to it."""
    rels = list(values)
    r.shuffle(rels)
    filler = r.choice(_FILLERS[kind])
    slot = r.randint(0, len(rels))
    items: list[tuple[str, str | None]] = [(r.choice(_RELATIONS[kind][rel][0]), rel) for rel in rels]
    items.insert(slot, (filler, None))
    text = intro
    starts = [0]
    facts: list[Fact] = []
    for template, rel in items:
        ref = r.choice(_REFS[kind]).format(**ctx)
        text += " "
        start = len(text)
        starts.append(start)
        if rel is None:
            text += template.format(Ref=ref)
            continue
        before, after = template.split("{v}")
        head = before.format(Ref=ref)
        v = values[rel]
        v_start = start + len(head)
        text += head + v + after
        facts.append(Fact(relation=rel, value=v, sentence_start=start, sentence_end=len(text),
                          value_start=v_start, value_end=v_start + len(v)))
    return text, tuple(starts), facts


def corpus_summary(corpus: Corpus) -> dict[str, Any]:
    """Counts for logs: documents by kind, questions by relation."""
    kinds: dict[str, int] = {}
    for d in corpus.documents:
        kinds[d.kind] = kinds.get(d.kind, 0) + 1
    rels: dict[str, int] = {}
    for q in corpus.questions:
        rels[q.relation] = rels.get(q.relation, 0) + 1
    return {"documents": len(corpus.documents), "questions": len(corpus.questions), "kinds": kinds,
            "relations": rels}
