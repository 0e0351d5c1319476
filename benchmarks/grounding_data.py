"""Readers for the human-labelled grounding material in ``../shared/data`` (never copied into the repo).

Two roles, kept apart on purpose:

- ``grounding-train/`` (:func:`load_train_pool`): eight sets of claim–evidence pairs, the only
  material a labeller may be fitted or calibrated on. Its ``source`` field names the set; model
  and threshold choices are made by leaving one set out at a time (:data:`TRAIN_SOURCES`).
- ``grounding-dev/`` (:func:`load_begin`, :func:`load_wice`): BEGIN and WiCE, which only measure.

Every item is an :class:`Item`: the text to judge, its evidence as sentences (the labeller receives
them joined as one passage), the binary label (1 = supported) and the set it came from.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ragtrace_evaluator.labellers.claims import split_sentences

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT / ".." / "shared" / "data"
DEFAULT_DEV = SHARED / "grounding-dev"
DEFAULT_TRAIN = SHARED / "grounding-train"

#: the sets of grounding-train, by their ``source`` field (the unit of leave-one-set-out)
TRAIN_SOURCES = ("bump", "cogensumm_pairs", "factcheckgpt", "faithdial_audit", "fib", "summedits", "wice_nst",
                 "xsumfaith")


@dataclass(frozen=True)
class Item:
    text: str
    evidence: tuple[str, ...]
    label: int  # 1 = supported
    source: str = ""
    #: the set's own finer label where it has one (WiCE: supported / partially_supported / not_supported)
    fine_label: str = ""
    id: str = ""

    @property
    def passage_text(self) -> str:
        """The evidence as the labeller receives it: one passage, sentences separated by blank lines."""
        return "\n\n".join(self.evidence)


def load_begin(folder: Path, limit: int | None = None) -> tuple[list[Item], list[str]]:
    """BEGIN dev (wow, cmu, tc): fully vs not fully attributable; "Generic" responses returned apart."""
    csv.field_size_limit(1 << 30)
    items: list[Item] = []
    generic: list[str] = []
    for name in ("wow", "cmu", "tc"):
        with open(folder / f"begin_dev_{name}.tsv", newline="", encoding="utf-8") as fh:
            for k, row in enumerate(csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)):
                label = row["begin_label"].strip()
                if label == "Generic":
                    generic.append(row["response"])
                    continue
                evidence = tuple(split_sentences(row["knowledge"])) or (row["knowledge"],)
                items.append(Item(row["response"], evidence, 1 if label == "Fully attributable" else 0,
                                  source=f"begin_{name}", fine_label=label, id=f"begin_{name}_{k}"))
    return (items[:limit] if limit else items), generic


def load_wice(folder: Path, limit: int | None = None) -> list[Item]:
    """WiCE claim dev: each claim against the sentences of the page it cites."""
    out = []
    with open(folder / "claim" / "dev.jsonl", encoding="utf-8") as fh:
        for k, line in enumerate(fh):
            row = json.loads(line)
            evidence = tuple(s for s in row["evidence"] if s.strip())
            out.append(Item(row["claim"], evidence, 1 if row["label"] == "supported" else 0, source="wice",
                            fine_label=row["label"], id=f"wice_{k}"))
    return out[:limit] if limit else out


# FIB stores CNN/DM and XSum text the way the summarisation toolkits tokenised it: sentence tags and
# Penn-Treebank bracket tokens. They are markup of the file, not words of the summary.
_PTB = {"-lrb-": "(", "-rrb-": ")", "-lsb-": "[", "-rsb-": "]", "-lcb-": "{", "-rcb-": "}", "``": '"', "''": '"'}
_PTB_RE = re.compile("|".join(re.escape(k) for k in _PTB))
_TAG_RE = re.compile(r"\s*</?t>\s*")


def _clean(text: str) -> str:
    return _PTB_RE.sub(lambda m: _PTB[m.group()], _TAG_RE.sub(" ", text)).strip()


def excluded(row: dict[str, object]) -> bool:
    """A training row left out of fitting and of the fold measurements (see :func:`load_train_pool`)."""
    meta = row.get("meta")
    meta = meta if isinstance(meta, dict) else {}
    if row.get("source") != "fib":
        return False
    return bool(meta.get("prompt_artifact")) or (meta.get("subset") == "cnn_dm" and row.get("label") == 0)


def load_train_pool(folder: Path, limit_per_source: int | None = None,
                    sources: Sequence[str] = TRAIN_SOURCES) -> list[Item]:
    """Every pair of grounding-train, in file order, with FIB's markup removed.

    Left out, because their label is not about support by the evidence:

    - FIB rows flagged ``meta.prompt_artifact`` (the distractor contains the prompt that produced it,
      a cue no real answer carries);
    - FIB's CNN/DM distractors: summaries by *extractive* systems (lead-3, oracle, textrank, ...), i.e.
      sentences copied verbatim from the article, which FIB labels 0. Every word of them is in the
      evidence, so under ragtrace's definition (is each claim supported by the supplied passages?)
      they are supported; FIB's reference summaries of the same articles stay in.

    Exact duplicates were already removed upstream.
    """
    items: list[Item] = []
    counts: dict[str, int] = {}
    for path in sorted(folder.glob("*.jsonl")):
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                row = json.loads(line)
                src = row["source"]
                if src not in sources or excluded(row):
                    continue
                if limit_per_source and counts.get(src, 0) >= limit_per_source:
                    continue
                counts[src] = counts.get(src, 0) + 1
                evidence_text = _clean(row["evidence"])
                evidence = tuple(split_sentences(evidence_text)) or (evidence_text,)
                items.append(Item(_clean(row["claim"]), evidence, int(row["label"]), source=src,
                                  fine_label=str((row.get("meta") or {}).get("orig_label", row["label"])),
                                  id=row["id"]))
    return items
