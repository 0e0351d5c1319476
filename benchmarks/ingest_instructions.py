"""Instructions per trace of the collector's ingest path, counted by callgrind: repeatable on a busy machine.

Time-based figures (`collector_ingest.py`) follow what other jobs leave of the 2 cores; instruction
counts do not, so they are what to compare between commits (issue 35 was bisected with this). The
workload is the ingest benchmark's own: requests of 100 standard traces (passages from a corpus of
5,000), built once by this checkout's builders so every commit measured gets the same bytes. In one
process, for each request: decode + walk + assemble (`ingest.decode_and_assemble`, the compiled
walk), LZ4 and spool append with fsync, `Writer.submit`; the writer's batches are inserted into
an embedded store. Batches are cut by span count only (``--batch-spans``, no clock), so runs repeat.
``--warm`` traces go first, uncounted, so the passage caches are in the steady state of a long run.
HTTP (uvicorn) is not included: it adds about 0.5 M instructions per trace, most of it copies of the
body that uvicorn makes.

Usage:  .venv/bin/python benchmarks/ingest_instructions.py [--traces 1000] [--warm 1000]
        .venv/bin/python benchmarks/ingest_instructions.py --code /tmp/wt-abc123   # another commit's code
``--code DIR``: a checkout of another commit (``git worktree add DIR COMMIT``, its native walk built
with ``DIR/collector/native/build.py``) measured with this checkout's workload. Needs valgrind and a C
compiler (``apt-get install valgrind gcc``); about 3 minutes for 1,000 traces. Not a test: no asserts.
"""

from __future__ import annotations

import argparse
import ctypes
import inspect
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: the source roots of a checkout (pyproject's [tool.setuptools.packages.find])
SOURCE_ROOTS = (".", "store/src", "collector/src", "evaluator/src", "review/src", "cli/src", "examples/src")
#: start and stop counting from inside the measured process (callgrind's client requests)
_CONTROL_C = """#include <valgrind/callgrind.h>
void count_start(void) { CALLGRIND_ZERO_STATS; CALLGRIND_START_INSTRUMENTATION; }
void count_stop(void) { CALLGRIND_STOP_INSTRUMENTATION; CALLGRIND_DUMP_STATS_AT("ingest"); }
"""


def build_workload(path: Path, warm: int, traces: int) -> None:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from collector_ingest import build_bodies

    bodies = build_bodies(warm + traces, 100, 5000)
    path.write_bytes(pickle.dumps({"warm": bodies[:warm // 100], "run": bodies[warm // 100:]}))


def measured(workload: Path, control: Path, batch_spans: int) -> None:
    """The counted run (inside valgrind): the same calls the collector makes per request."""
    import gc

    from ragtrace_collector import ingest
    from ragtrace_collector.metrics import Metrics
    from ragtrace_collector.spool import Spool
    from ragtrace_collector.writer import Writer
    from ragtrace_store import open_store

    counter = ctypes.CDLL(str(control))
    data = pickle.loads(workload.read_bytes())
    work = Path(tempfile.mkdtemp(prefix="ragtrace-instructions-"))
    store = open_store(str(work / "store"), migrate=True)
    writer = Writer(store, Spool(work / "spool", max_bytes=4 << 30, fsync=True), Metrics(),
                    batch_max_spans=batch_spans, batch_interval=3600.0)
    writer.start()

    # older commits' decode_and_assemble took no passage cache
    cached = "written" in inspect.signature(ingest.decode_and_assemble).parameters

    def post(body: bytes) -> None:
        ms = time.time_ns() // 1_000_000
        args = (body, "application/x-protobuf", None, "default", ms, 64 << 20)
        rows, spooled = (ingest.decode_and_assemble(*args, writer.written_passages) if cached
                         else ingest.decode_and_assemble(*args))
        writer.submit("default", ms, spooled, rows)

    def written() -> None:
        while True:  # whole batches only: nothing is left queued
            with writer._cond:
                if not writer._queue and not writer._busy:
                    return
            time.sleep(0.01)  # the writer thread inserts

    try:
        for body in data["warm"]:
            post(body)
        written()
        gc.freeze()
        gc.set_threshold(10_000, 20, 20)  # as `ragtrace serve` does
        counter.count_start()
        for body in data["run"]:
            post(body)
        written()
        counter.count_stop()
        print(f"code: {ingest.__file__}", file=sys.stderr)
    finally:
        writer.stop(600)
        store.close()
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--traces", type=int, default=1000, help="traces counted (a multiple of 100)")
    ap.add_argument("--warm", type=int, default=1000, help="traces sent first, not counted (a multiple of 100)")
    ap.add_argument("--batch-spans", type=int, default=2000, help="the writer's batch size (a multiple of 400)")
    ap.add_argument("--code", type=Path, help="measure this checkout's code (another commit) instead")
    ap.add_argument("--measured", nargs=2, type=Path, help=argparse.SUPPRESS)  # internal: the counted run
    a = ap.parse_args()
    if a.measured:
        measured(a.measured[0], a.measured[1], a.batch_spans)
        return
    if a.traces % 100 or a.warm % 100 or a.batch_spans % 400:
        ap.error("--traces and --warm must be multiples of 100 (traces per request), --batch-spans of 400")
    for tool in ("valgrind", "gcc"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} not found: apt-get install valgrind gcc")
    code = (a.code or ROOT).resolve()
    with tempfile.TemporaryDirectory(prefix="ragtrace-instructions-") as tmp:
        work = Path(tmp)
        control = work / "count.so"
        (work / "count.c").write_text(_CONTROL_C)
        subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(control), str(work / "count.c")], check=True)
        build_workload(work / "workload.pkl", a.warm, a.traces)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(code / r) for r in SOURCE_ROOTS)}
        out = work / "callgrind.out"
        t0 = time.monotonic()
        subprocess.run(["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
                        sys.executable, str(Path(__file__).resolve()), "--batch-spans", str(a.batch_spans),
                        "--measured", str(work / "workload.pkl"), str(control)],
                       env=env, check=True, stdout=subprocess.DEVNULL, stderr=(work / "valgrind.log").open("w"))
        found = []  # the dump made by count_stop (the one at exit counts nothing)
        for dump in work.glob("callgrind.out*"):
            text = dump.read_text(errors="replace")
            total = re.search(r"^totals: (\d+)", text, re.M)
            if "Client Request: ingest" in text and total:
                found.append(int(total.group(1)))
        if not found:
            sys.exit(f"no callgrind dump; valgrind said:\n{(work / 'valgrind.log').read_text()[-3000:]}")
        measured_code = re.findall(r"code: .*", (work / "valgrind.log").read_text())
        print(f"{code}: {a.traces} traces after {a.warm} uncounted; {measured_code[-1] if measured_code else ''}")
        print(f"instructions: {found[-1] / a.traces / 1e6:.3f} M per trace ({found[-1]:,} in all; "
              f"{time.monotonic() - t0:.0f} s under callgrind)")


if __name__ == "__main__":
    main()
