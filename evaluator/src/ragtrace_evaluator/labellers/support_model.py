"""The offline labeller's fitted artefact: a support model over claim features, its calibration, its
thresholds and the word statistics it was fitted with, in one JSON file shipped with the package.

The artefact is data, not code: boosted trees (or a logistic model) as arrays, evaluated here with
numpy, so loading it needs no scikit-learn, no network and no pickle. It is written by
``benchmarks/grounding_fit.py`` from ``../shared/data/grounding-train`` (see that module and
docs/labellers.md) and never by the test suite. Its SHA-256 and its training-data description go
into the labeller manifest, so every label names the exact model behind it.

Layout (``format`` = 1)::

    {"format": 1, "formula_version": "...", "features": [names...], "top_k": k,
     "model": {"kind": "trees", "base": b, "learning_rate": 1.0,
               "trees": [{"feature": [...], "threshold": [...], "left": [...], "right": [...],
                          "value": [...]}, ...]}
            | {"kind": "logistic", "mean": [...], "scale": [...], "coef": [...], "intercept": b},
     "calibration": {"a": a, "b": b},          # P = sigmoid(a * z + b), z = the model's raw score
     "thresholds": {"support": t, "contradiction": c, "review": r},
     "generic_answers": "whole_text" | "unscored",   # optional; see SupportModel.judge_generic
     "contradiction_weight": w,                      # optional (1); see SupportModel.contradiction_weight
     "idf": {"default": d, "stems": {stem: idf}},
     "training_data": {...}, "cv": {...}}

A tree node with ``left == -1`` is a leaf holding ``value``; otherwise rows with
``x[feature] <= threshold`` go left (NaN goes right: features are never NaN here).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

ARTEFACT_FORMAT = 1
#: the artefact shipped in the package (``ragtrace_evaluator/labellers/models/``)
DEFAULT_ARTEFACT = "grounding-offline.json"
#: what ``benchmarks/grounding_accuracy.py --write-measured`` measured for that artefact on the dev
#: sets (risk–coverage at its review threshold); kept apart so re-measuring never changes its hash
MEASURED = "grounding-offline.measured.json"


class ArtefactError(ValueError):
    """The support-model artefact is missing, malformed or of another format; the message says which."""


@dataclass(frozen=True)
class _Trees:
    base: float
    trees: tuple[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray], ...]

    def raw(self, x: np.ndarray) -> np.ndarray:
        out = np.full(len(x), self.base)
        rows = np.arange(len(x))
        for feature, threshold, left, right, value in self.trees:
            node = np.zeros(len(x), dtype=np.int64)
            # depth is small (≤ 8): walk all rows one level per step until every row sits on a leaf
            for _ in range(64):
                inner = left[node] >= 0
                if not inner.any():
                    break
                go_left = x[rows, feature[node]] <= threshold[node]
                node = np.where(inner, np.where(go_left, left[node], right[node]), node)
            out += value[node]
        return out


@dataclass(frozen=True)
class _Logistic:
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float

    def raw(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(((x - self.mean) / self.scale) @ self.coef + self.intercept, dtype=np.float64)


@dataclass(frozen=True)
class SupportModel:
    """A loaded artefact. ``predict(x)`` gives calibrated P(supported) for rows of claim features
    (columns in ``features`` order)."""

    features: tuple[str, ...]
    model: _Trees | _Logistic
    calibration: tuple[float, float]
    thresholds: dict[str, float]
    idf_default: float
    idf: dict[str, float]
    sha256: str
    formula_version: str
    training_data: dict[str, Any] = field(default_factory=dict)
    cv: dict[str, Any] = field(default_factory=dict)
    kind: str = "trees"
    #: a generic (claim-less) answer's whole text is judged as one claim to rank it (artefact
    #: ``"generic_answers": "whole_text"``; absent: such answers get no score)
    judge_generic: bool = False
    #: how many aligned sentences form a claim's local evidence (chosen with the model)
    top_k: int = 3
    #: c in a claim's ranking score support × (1 − c · contradiction), chosen with the model (artefact
    #: ``"contradiction_weight"``; absent, as in offline-10's: 1)
    contradiction_weight: float = 1.0

    def raw(self, x: np.ndarray) -> np.ndarray:
        if x.ndim != 2 or x.shape[1] != len(self.features):
            raise ArtefactError(f"feature matrix has shape {x.shape}; the model expects {len(self.features)} columns")
        return self.model.raw(np.asarray(x, dtype=np.float64))

    def calibrated(self, raw: np.ndarray) -> np.ndarray:
        a, b = self.calibration
        return 1.0 / (1.0 + np.exp(-(a * raw + b)))

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.calibrated(self.raw(x))

    def idf_of(self, stem: str) -> float:
        return self.idf.get(stem, self.idf_default)

    def describe(self) -> dict[str, Any]:
        """What the labeller manifest records about the artefact."""
        return {"file": DEFAULT_ARTEFACT, "file_sha256": self.sha256, "model_kind": self.kind,
                "features": list(self.features), "training_data": self.training_data,
                "generic_answers": "whole_text" if self.judge_generic else "unscored",
                "contradiction_weight": self.contradiction_weight}


def _trees(spec: dict[str, Any]) -> _Trees:
    trees = []
    for t in spec["trees"]:
        trees.append((np.asarray(t["feature"], dtype=np.int64), np.asarray(t["threshold"], dtype=np.float64),
                      np.asarray(t["left"], dtype=np.int64), np.asarray(t["right"], dtype=np.int64),
                      np.asarray(t["value"], dtype=np.float64) * float(spec.get("learning_rate", 1.0))))
    return _Trees(float(spec["base"]), tuple(trees))


def parse_artefact(data: bytes) -> SupportModel:
    """A SupportModel from the artefact's bytes (its SHA-256 is of exactly these bytes)."""
    try:
        spec = json.loads(data)
    except json.JSONDecodeError as exc:
        raise ArtefactError(f"the support-model artefact is not JSON: {exc}") from exc
    if spec.get("format") != ARTEFACT_FORMAT:
        raise ArtefactError(f"support-model artefact format {spec.get('format')!r}; this code reads "
                            f"{ARTEFACT_FORMAT}: rebuild it with benchmarks/grounding_fit.py")
    m = spec["model"]
    model: _Trees | _Logistic
    if m["kind"] == "trees":
        model = _trees(m)
    elif m["kind"] == "logistic":
        model = _Logistic(np.asarray(m["mean"]), np.asarray(m["scale"]), np.asarray(m["coef"]), float(m["intercept"]))
    else:
        raise ArtefactError(f"unknown model kind {m['kind']!r} in the support-model artefact")
    cal = spec["calibration"]
    return SupportModel(
        features=tuple(spec["features"]), model=model, calibration=(float(cal["a"]), float(cal["b"])),
        thresholds={k: float(v) for k, v in spec["thresholds"].items()},
        idf_default=float(spec["idf"]["default"]), idf={k: float(v) for k, v in spec["idf"]["stems"].items()},
        sha256=hashlib.sha256(data).hexdigest(), formula_version=str(spec["formula_version"]),
        training_data=spec.get("training_data", {}), cv=spec.get("cv", {}), kind=m["kind"],
        top_k=int(spec.get("top_k", 3)), judge_generic=_generic_answers(spec),
        contradiction_weight=_contradiction_weight(spec))


def _contradiction_weight(spec: dict[str, Any]) -> float:
    value = spec.get("contradiction_weight", 1.0)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise ArtefactError(f"contradiction_weight {value!r} in the support-model artefact: expected a number in "
                            "[0, 1]")
    return float(value)


def _generic_answers(spec: dict[str, Any]) -> bool:
    mode = spec.get("generic_answers", "unscored")
    if mode not in ("unscored", "whole_text"):
        raise ArtefactError(f"generic_answers {mode!r} in the support-model artefact: expected 'unscored' or "
                            "'whole_text'")
    return bool(mode == "whole_text")


def load_artefact(path: str | Path | None = None) -> SupportModel:
    """The artefact at ``path``, or the one shipped in the package (read offline, from the wheel)."""
    if path is not None:
        try:
            return parse_artefact(Path(path).read_bytes())
        except OSError as exc:
            raise ArtefactError(f"cannot read the support-model artefact {path}: {exc}") from exc
    return _packaged()


@lru_cache(maxsize=1)
def _packaged() -> SupportModel:
    try:
        data = resources.files("ragtrace_evaluator.labellers").joinpath("models", DEFAULT_ARTEFACT).read_bytes()
    except (OSError, FileNotFoundError) as exc:
        raise ArtefactError(
            f"the packaged support model models/{DEFAULT_ARTEFACT} is missing: reinstall ragtrace, or rebuild it "
            "with `.venv/bin/python benchmarks/grounding_fit.py`") from exc
    return parse_artefact(data)


def measured_record(model: SupportModel, review: float) -> dict[str, Any]:
    """The packaged dev-set measurement at the review threshold, if it was made for this very
    artefact and threshold; otherwise a note saying it was not (a rebuilt artefact is unmeasured)."""
    try:
        data = json.loads(resources.files("ragtrace_evaluator.labellers").joinpath("models", MEASURED).read_text())
    except (OSError, FileNotFoundError, json.JSONDecodeError):
        return {"note": "not measured: run benchmarks/grounding_accuracy.py --write-measured"}
    if data.get("artefact_sha256") != model.sha256 or data.get("review_threshold") != review:
        return {"note": "measured for another artefact or threshold: rerun benchmarks/grounding_accuracy.py "
                        "--write-measured"}
    return {"source": data.get("source", "benchmarks/grounding_accuracy.py"), "sets": data.get("sets", {})}


def sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z)) if z > -700 else 0.0
