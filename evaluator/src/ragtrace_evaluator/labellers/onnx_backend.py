"""ONNX Runtime backend for the sentence embedder: ~3–4× the texts/s of torch fp32 on 2 CPU cores.

The model is exported from the same weights once per machine into a cache directory
(``RAGTRACE_CACHE_DIR``, default ``~/.cache/ragtrace``), named by the weights' SHA-256, and written
atomically so concurrent processes never read half a file. An export is used only after it
reproduces the torch model's embeddings on probe sentences (max abs difference ≤ 1e-4, fp32 — no
int8 quantisation, which drifts); otherwise the embedder stays on torch and says why in its manifest.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np

PROBES = ["Water boils at 100 degrees Celsius at sea level.", "A short one.",
          "The Eiffel Tower was completed in March 1889 and is 330 metres tall."]
TOLERANCE = 1e-4
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def available() -> bool:
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def cache_dir() -> Path:
    return Path(os.environ.get("RAGTRACE_CACHE_DIR", Path.home() / ".cache" / "ragtrace"))


def mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Mean of token states over the attention mask, L2-normalised (sentence-transformers pooling)."""
    m = mask[..., None].astype(hidden.dtype)
    pooled = (hidden * m).sum(1) / np.clip(m.sum(1), 1e-9, None)
    return np.asarray(pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None))


class OnnxEncoder:
    """Last hidden states from an exported encoder, via ONNX Runtime on the CPU."""

    def __init__(self, path: Path, threads: int | None = None) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or min(4, os.cpu_count() or 1)
        self.path = path
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.inputs = {i.name for i in self.session.get_inputs()}

    def hidden(self, batch: dict[str, np.ndarray]) -> np.ndarray:
        feed = {k: batch[k].astype(np.int64) for k in INPUTS if k in self.inputs and k in batch}
        return np.asarray(self.session.run(None, feed)[0])


def _export(model_dir: Path, tokenizer: Any, target: Path) -> None:
    import torch
    from transformers import AutoModel

    # A separate copy with eager attention: tracing the SDPA path bakes padding branches into the graph
    # (and tracing may leave the traced module altered), so the serving torch model is never touched.
    model = AutoModel.from_pretrained(str(model_dir), attn_implementation="eager").eval()

    class _Hidden(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.inner(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    enc = tokenizer(PROBES, padding=True, return_tensors="pt")
    if "token_type_ids" not in enc:
        enc["token_type_ids"] = torch.zeros_like(enc["input_ids"])
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".onnx", dir=target.parent)
    os.close(fd)
    try:
        torch.onnx.export(_Hidden(model), (enc["input_ids"], enc["attention_mask"], enc["token_type_ids"]), tmp,
                          input_names=list(INPUTS), output_names=["hidden"], opset_version=17, dynamo=False,
                          dynamic_axes={name: {0: "batch", 1: "tokens"} for name in (*INPUTS, "hidden")})
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def load_or_export(model: Any, tokenizer: Any, weights_sha256: str,
                   model_dir: Path) -> tuple[OnnxEncoder | None, str]:
    """(encoder, note): the ONNX encoder for these weights, verified against ``model`` (the torch
    model in use) on padded probe batches, or None and the reason."""
    if not available():
        return None, "onnx/onnxruntime not installed"
    target = cache_dir() / f"minilm-{weights_sha256[:16]}.onnx"
    try:
        if not target.exists():
            _export(model_dir, tokenizer, target)
        encoder = OnnxEncoder(target)
    except Exception as exc:  # any exporter/runtime failure: torch still works, so fall back
        return None, f"onnx export failed: {type(exc).__name__}: {exc}"[:300]
    import torch

    enc = tokenizer(PROBES, padding=True, return_tensors="pt")
    with torch.inference_mode():
        reference = mean_pool(model(**enc).last_hidden_state.numpy(), enc["attention_mask"].numpy())
    got = mean_pool(encoder.hidden({k: v.numpy() for k, v in enc.items()}), enc["attention_mask"].numpy())
    diff = float(np.max(np.abs(got - reference)))
    if diff > TOLERANCE:
        return None, f"onnx export differs from torch by {diff:.2e} > {TOLERANCE}"
    return encoder, f"onnx ({target.name}, max diff vs torch {diff:.1e})"


# ---- sequence classifiers (the NLI cross-encoder) -----------------------------------------------

CLASSIFIER_PROBES = [("Water boils at 100 degrees Celsius at sea level.", "Water boils at 100 °C."),
                     ("A short one.", "The Eiffel Tower was completed in March 1889 and is 330 metres tall.")]


class OnnxClassifier:
    """Logits of an exported sequence classifier, via ONNX Runtime on the CPU."""

    def __init__(self, path: Path, threads: int | None = None) -> None:
        self.encoder = OnnxEncoder(path, threads)
        self.path = path

    def logits(self, batch: dict[str, np.ndarray]) -> np.ndarray:
        return self.encoder.hidden(batch)


def _export_classifier(model_dir: Path, tokenizer: Any, target: Path) -> None:
    import torch
    from transformers import AutoModelForSequenceClassification

    from ragtrace_evaluator.labellers.hf_loading import quiet_loading

    with quiet_loading():
        model = AutoModelForSequenceClassification.from_pretrained(str(model_dir),
                                                                   attn_implementation="eager").eval()

    class _Logits(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.inner(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).logits

    enc = tokenizer([p for p, _ in CLASSIFIER_PROBES], [h for _, h in CLASSIFIER_PROBES], padding=True,
                    return_tensors="pt")
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".onnx", dir=target.parent)
    os.close(fd)
    try:
        with warnings.catch_warnings():
            # the tracer's notes on the attention mask's shape branches: the probes are padded
            warnings.simplefilter("ignore")
            torch.onnx.export(_Logits(model), (enc["input_ids"], enc["attention_mask"], enc["token_type_ids"]),
                              tmp, input_names=list(INPUTS), output_names=["logits"], opset_version=17,
                              dynamo=False, dynamic_axes={**{name: {0: "batch", 1: "tokens"} for name in INPUTS},
                                                          "logits": {0: "batch"}})
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def load_or_export_classifier(model: Any, tokenizer: Any, weights_sha256: str,
                              model_dir: Path) -> tuple[OnnxClassifier | None, str]:
    """(classifier, note): the ONNX classifier for these weights, verified against the torch ``model``
    on padded probe pairs (max abs logit difference ≤ 1e-4), or None and the reason."""
    if not available():
        return None, "onnx/onnxruntime not installed"
    if "token_type_ids" not in tokenizer.model_input_names:
        return None, "onnx export supports BERT-style inputs only (token_type_ids)"
    target = cache_dir() / f"classifier-{weights_sha256[:16]}.onnx"
    try:
        if not target.exists():
            _export_classifier(model_dir, tokenizer, target)
        classifier = OnnxClassifier(target)
    except Exception as exc:  # any exporter/runtime failure: torch still works, so fall back
        return None, f"onnx export failed: {type(exc).__name__}: {exc}"[:300]
    import torch

    enc = tokenizer([p for p, _ in CLASSIFIER_PROBES], [h for _, h in CLASSIFIER_PROBES], padding=True,
                    return_tensors="pt")
    with torch.inference_mode():
        reference = model(**enc).logits.float().numpy()
    got = classifier.logits({k: v.numpy() for k, v in enc.items()})
    diff = float(np.max(np.abs(got - reference)))
    if diff > TOLERANCE * 10:
        return None, f"onnx export differs from torch by {diff:.2e} > {TOLERANCE * 10}"
    return classifier, f"onnx ({target.name}, max logit diff vs torch {diff:.1e})"
