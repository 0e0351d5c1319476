"""What checking content hashes at ingest (issue 14, item 3) costs the native walk, in CPU time.

One request of ``--traces`` standard traces (a retriever with 20 candidates of ~1 KB, a reranker, a
generation span; passages drawn from ``--corpus`` distinct texts, so most of a request's passages are
distinct and each is hashed once). Three things are timed, each the median of ``--runs`` runs, in
process CPU time (on a shared machine wall time follows the other jobs):
the whole walk (`native_walk.assemble_body`, which checks), parse + span tuples alone, and parse +
span tuples + `Request.verify` for every span with documents. verify − parse is the check's cost.

Usage:  .venv/bin/python benchmarks/hash_check_cost.py [--traces 100] [--corpus 5000] [--runs 30]
Not a test: no asserts.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ragtrace_collector import native_walk
from tests import otlp_builders as T


def cpu_ms(fn: Callable[[], object], runs: int) -> float:
    fn()  # warm up (key caches, the spare arena block)
    times = []
    for _ in range(runs):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return statistics.median(times) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--traces", type=int, default=100)
    ap.add_argument("--corpus", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=30)
    a = ap.parse_args()
    if not native_walk.available():
        sys.exit(native_walk.UNAVAILABLE)
    docs = T.corpus(a.corpus, size=1000)
    body = T.request([s for i in range(a.traces) for s in T.standard_trace(docs, i * 7).spans()]).SerializeToString()
    native = native_walk._otlp_native

    def walk() -> None:
        native_walk.assemble_body(body, "t", 0, None)

    def parse() -> None:
        native.parse(body).spans()

    def parse_and_verify() -> None:
        request = native.parse(body)
        for _, spans in request.spans():
            for span in spans:
                if span[10] is not None:
                    request.verify(span[10])

    whole, base, checked = cpu_ms(walk, a.runs), cpu_ms(parse, a.runs), cpu_ms(parse_and_verify, a.runs)
    print(f"{a.traces} traces, {len(body) / 1e6:.1f} MB: whole walk {whole:.2f} ms CPU; parse {base:.2f} ms; "
          f"parse + verify {checked:.2f} ms; the check {checked - base:.2f} ms = {(checked - base) / whole:.0%} "
          "of the walk")


if __name__ == "__main__":
    main()
