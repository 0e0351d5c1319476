"""`ragtrace demo`: the whole product end to end on a generated corpus, in a few minutes.

1. generate a corpus with ground truth and two releases: the baseline and a candidate with
   injected faults at every boundary (``faults.jsonl`` records which queries each breaks);
2. import the golden questions' reference answers and their evidence as character spans of the
   source documents (``ragtrace labels import references.jsonl`` / ``corpus/evidence.jsonl``), then
   start ``ragtrace serve`` on the embedded store (a temporary one unless ``--store``);
3. run the example RAG service (FastAPI + ragtrace middleware) for each release on a local port
   and send it the golden questions over HTTP; the SDK exports to the collector. Every chunk
   reports its provenance (source document and character span) and the traces carry no gold
   ids, so the audit resolves the evidence spans to whichever chunks each release's chunker cut
   (the candidate's chunker fault re-cuts documents: chunk-id gold of the baseline build would
   no longer name them);
4. wait until the collector has stored every trace, then audit them *through the server*
   (``POST /api/audit``: the serving process owns the embedded store, so it does the reading);
5. compare the releases from the per-trace labels, write the HTML report, check the labels
   against the injected faults;
6. stop the server so this process may use the store: add a reviewer, fill a review queue;
7. print the report path, failure modes, tripped gate, review URL and reviewer token; with
   ``--keep-serving`` start the server again and leave it up for a person to click through.

The terminal gets one line a step and the summary (about 35 lines); ``demo.log`` in the output
folder gets everything, the steps' commands and the full ``ragtrace compare`` output among it, and
``--verbose`` prints that too.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragtrace_examples.corpus import Corpus, corpus_summary, generate_corpus
from ragtrace_examples.faults import Fault, Release, baseline_release, candidate_release, check_labels, write_faults
from ragtrace_store import FAILURE_MODES, LabelError, LabelRecord, read_label_lines, write_label_lines

if TYPE_CHECKING:  # torch and transformers load only when the service starts
    from ragtrace_examples.components import MiniLMEncoder

__all__ = ["DemoConfig", "DemoError", "DemoResult", "demo_main", "run_demo"]

REVIEW_QUEUE = "demo"
REVIEWER = "demo-reviewer"


class DemoError(RuntimeError):
    """A demo step failed; the message names the step and where its log is."""


@dataclass(frozen=True)
class DemoConfig:
    out: Path
    store: Path | None = None
    docs: int = 150
    seed: int = 0
    service: str = "example-rag"
    baseline: str = "v1"
    candidate: str = "v2"
    generator: str = "extractive"
    port: int = 0  # 0 = a free port
    keep_serving: bool = False
    quiet: bool = False
    #: also print the progress and the full `ragtrace compare` output (always in demo.log)
    verbose: bool = False
    resamples: int = 2000
    #: fault -> share of questions the candidate breaks (None = `faults.DEFAULT_RATES`)
    rates: Mapping[Fault, float] | None = None


@dataclass
class DemoResult:
    out: Path
    store: Path
    collector_url: str
    report_html: Path
    compare_json: Path
    labels: dict[str, Path]
    faults: Path
    audit: dict[str, Any]
    compare_exit: int
    tripped_gates: list[str]
    fault_check: dict[str, Any]
    review_url: str = ""
    reviewer_token: str = ""
    #: compare's deciding-slice statement when a gold-in-context gate tripped (else "")
    deciding_slice: str = ""
    timings: dict[str, float] = field(default_factory=dict)


# --- the collector as a child process --------------------------------------------------------------
class Collector:
    """``ragtrace serve`` in a subprocess on ``port``; its output goes to ``log``."""

    def __init__(self, store: Path, port: int, log: Path) -> None:
        self.store, self.port, self.log = store, port, log
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 120.0) -> None:
        from ragtrace_cli.remote import RemoteClient, RemoteError

        # Another server on the port would answer the readiness probe before the child fails to
        # bind, and the demo would then write its traffic and labels to that server's store.
        if self.port and not _port_free(self.port):
            raise DemoError(f"port {self.port} is already in use on 127.0.0.1 (another `ragtrace serve`?): give "
                            "another --port, or leave --port out for a free one")
        fh = open(self.log, "ab")  # noqa: SIM115 - the child keeps writing after this returns
        cmd = [sys.executable, "-m", "ragtrace_cli.main", "serve", "--store", str(self.store), "--port", str(self.port),
               "--log-level", "warning"]
        self.proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
        fh.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise DemoError(f"`ragtrace serve` exited with {self.proc.returncode}; see {self.log}:\n"
                                + _tail(self.log))
            with contextlib.suppress(RemoteError), RemoteClient(self.url, timeout=2) as remote:
                remote.get("/readyz")  # 503 until the store is open and migrated
                return
            time.sleep(0.3)
        self.stop()
        raise DemoError(f"`ragtrace serve` did not become ready in {timeout:.0f}s; see {self.log}")

    def stop(self, timeout: float = 60.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)  # the collector flushes its queue on SIGTERM
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def wait(self) -> None:
        if self.proc is not None:
            self.proc.wait()


def _tail(path: Path, n: int = 20) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-n:])
    except OSError:
        return ""


def reranker_encoder() -> MiniLMEncoder:
    """The example service's MiniLM reranker, loaded without transformers' progress bar: the demo's
    output is its steps and its summary (the service itself, a stand-in for the user's, keeps the
    library's default)."""
    from ragtrace_evaluator.labellers.hf_loading import quiet_loading
    from ragtrace_examples.components import MiniLMEncoder

    with quiet_loading():
        return MiniLMEncoder()


def _port_free(port: int) -> bool:
    """Whether nothing listens on 127.0.0.1:``port`` (SO_REUSEADDR as uvicorn binds: connections of
    an earlier server on the port still in TIME_WAIT do not count)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- steps -----------------------------------------------------------------------------------------
def send_traffic(corpus: Corpus, release: Release, collector_url: str, cfg: DemoConfig, encoder: Any,
                 say: Callable[[str], None]) -> int:
    """Serve ``release`` over HTTP with tracing to the collector and ask it every golden question."""
    import httpx

    import ragtrace
    from ragtrace_examples.pipeline import RagPipeline
    from ragtrace_examples.rag_service import create_app, serve_in_thread

    ragtrace.configure(endpoint=collector_url, service=cfg.service, release=release.name,
                       environment="demo", schedule_delay_ms=200)
    # No gold ids on the traces: the imported evidence spans are the gold, re-resolved per build.
    pipeline = RagPipeline(corpus, release, encoder=encoder, generator=cfg.generator, record_gold=False)
    url, stop = serve_in_thread(create_app(pipeline))
    sent = 0
    try:
        with httpx.Client(base_url=url, timeout=120) as client:
            for i, q in enumerate(corpus.questions):
                resp = client.post("/ask", json={"question": q.question, "query_id": q.id})
                if resp.status_code != 200:
                    raise DemoError(f"the example service answered {resp.status_code} to {q.id}: {resp.text[:300]}")
                sent += 1
                if (i + 1) % 50 == 0:
                    say(f"    {release.name}: {i + 1}/{len(corpus.questions)} questions")
    finally:
        stop()
        ragtrace.force_flush(30)
    return sent


def record_releases(corpus: Corpus, releases: Sequence[Release], store: Path, folder: Path, *, service: str,
                    environment: str, timeout: float = 600.0) -> None:
    """Every golden question through each release's pipeline, in this process, traced to a fresh
    ``ragtrace serve`` child on ``store``; returns once the collector has stored every trace.

    The pipelines record no gold ids, as in the demo: gold comes from the labels the caller imports.
    """
    import ragtrace
    from ragtrace_examples.pipeline import RagPipeline

    collector = Collector(store, _free_port(), folder / "collector.log")
    collector.start()
    try:
        encoder = reranker_encoder()
        for rel in releases:
            ragtrace.configure(endpoint=collector.url, service=service, release=rel.name,
                               environment=environment, schedule_delay_ms=100)
            pipeline = RagPipeline(corpus, rel, encoder=encoder, record_gold=False)
            for q in corpus.questions:
                pipeline.ask(q.question, q.id)
            ragtrace.force_flush(30)
        ragtrace.shutdown()
        wait_for_traces(collector.url, service, {r.name: len(corpus.questions) for r in releases}, timeout=timeout)
    finally:
        collector.stop()


def wait_for_traces(collector_url: str, service: str, expected: dict[str, int], timeout: float = 120.0) -> None:
    from ragtrace_cli.remote import RemoteClient, RemoteError

    deadline = time.monotonic() + timeout
    seen: dict[str, int] = {}
    with RemoteClient(collector_url, timeout=60) as remote:
        while time.monotonic() < deadline:
            for release, _n in expected.items():
                try:
                    listed = remote.get("/api/traces", {"service": service, "release": release, "limit": 100_000})
                except RemoteError as exc:
                    raise DemoError(f"GET /api/traces: {exc}") from exc
                seen[release] = len(listed)
            if all(seen.get(r, 0) >= n for r, n in expected.items()):
                return
            time.sleep(0.5)
    raise DemoError(f"the collector stored {seen} traces of {expected} within {timeout:.0f}s")


def audit_through_server(collector_url: str, service: str) -> dict[str, Any]:
    from ragtrace_cli.remote import RemoteClient, RemoteError

    try:
        with RemoteClient(collector_url, timeout=1800) as remote:
            report: dict[str, Any] = remote.post_json("/api/audit", {"service": service, "return_records": True})
    except RemoteError as exc:
        raise DemoError(f"POST /api/audit: {exc}") from exc
    return report


def _ragtrace(args: Sequence[str], log: Path) -> str:
    """Run a ``ragtrace`` subcommand in a child process (it opens the embedded store itself)."""
    proc = subprocess.run([sys.executable, "-m", "ragtrace_cli.main", *args], capture_output=True, text=True,
                          timeout=600)
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(f"$ ragtrace {' '.join(args)}\n{proc.stdout}{proc.stderr}\n")
    if proc.returncode != 0:
        raise DemoError(f"`ragtrace {' '.join(args[:2])}` failed ({proc.returncode}): {proc.stderr.strip()[-800:]}")
    return proc.stdout


def write_references(path: Path, corpus: Corpus) -> Path:
    """The golden questions' short reference answers (the fact's value) as `ragtrace labels import`
    reads them, so the audit scores each answer's correctness rather than only its grounding."""
    with open(path, "w", encoding="utf-8") as fh:
        for q in corpus.questions:
            fh.write(json.dumps({"query_id": q.id, "reference": q.answer}) + "\n")
    return path


def run_demo(cfg: DemoConfig) -> DemoResult:
    """Run every step; raises `DemoError` with the failing step and its log."""
    t0 = time.perf_counter()
    timings: dict[str, float] = {}
    out = cfg.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    store = (cfg.store or out / "store").resolve()
    log = out / "demo.log"

    def say(msg: str, *, detail: bool = False) -> None:
        """A step's line: on the terminal (a ``detail`` only with --verbose) and always in demo.log."""
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(msg + "\n")
        if cfg.verbose or not (cfg.quiet or detail):
            print(msg, flush=True)

    say(f"[1/6] corpus: {cfg.docs} documents with golden questions (seed {cfg.seed})")
    corpus = generate_corpus(cfg.docs, seed=cfg.seed)
    corpus.save(out / "corpus")
    # The candidate's chunker re-cuts the whole index, as a real chunker change does: chunk-id gold of
    # the baseline build names no chunk of it, while only the chunk_split documents lose their evidence.
    releases = [baseline_release(cfg.baseline), candidate_release(corpus, cfg.candidate, rates=cfg.rates,
                                                                           seed=cfg.seed, recut_index=True)]
    faults_path = write_faults(out / "faults.jsonl", releases)
    summary = corpus_summary(corpus)
    say(f"      {summary['documents']} documents ({summary['kinds']}), {summary['questions']} questions; "
        f"{cfg.candidate}: {releases[1].description}")

    say(f"[2/6] reference answers and evidence spans (`ragtrace labels import`), then ragtrace serve on the "
        f"embedded store {store}")
    refs_path = write_references(out / "references.jsonl", corpus)
    # Readers never change the schema: the store is created (migrated) first, as a user would.
    _ragtrace(["store", "migrate", "--store", str(store)], log)
    _ragtrace(["labels", "import", str(refs_path), "--kind", "references", "--store", str(store)], log)
    # The gold as offsets in the source documents (written by Corpus.save), not as chunk ids: it
    # holds for the candidate's re-cut documents too.
    _ragtrace(["labels", "import", str(out / "corpus" / "evidence.jsonl"), "--kind", "spans", "--store", str(store)],
              log)
    port = cfg.port or _free_port()
    collector = Collector(store, port, out / "collector.log")
    collector.start()
    timings["start_collector_s"] = time.perf_counter() - t0
    try:
        say("[3/6] example RAG service: golden-question traffic for each release over HTTP")
        encoder = reranker_encoder()  # shared by both releases: embeddings are cached by text
        expected: dict[str, int] = {}
        for rel in releases:
            t = time.perf_counter()
            expected[rel.name] = send_traffic(corpus, rel, collector.url, cfg, encoder,
                                              lambda msg: say(msg, detail=True))
            timings[f"traffic_{rel.name}_s"] = time.perf_counter() - t
        say("      " + ", ".join(f"{name}: {n} queries in {timings[f'traffic_{name}_s']:.1f}s"
                                 for name, n in expected.items()))
        import ragtrace

        ragtrace.shutdown()
        wait_for_traces(collector.url, cfg.service, expected)

        say("[4/6] ragtrace audit through the server (POST /api/audit)")
        t = time.perf_counter()
        report = audit_through_server(collector.url, cfg.service)
        timings["audit_s"] = time.perf_counter() - t
        try:
            records = [LabelRecord.from_json(r, f"POST /api/audit record {i}")
                       for i, r in enumerate(report.pop("records", []))]
        except LabelError as exc:
            raise DemoError(f"the audit returned a bad label record: {exc}") from exc
        (out / "audit.json").write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")
        labels: dict[str, Path] = {}
        for rel in releases:
            path = out / f"labels-{rel.name}.jsonl"
            write_label_lines(path, [rec for rec in records if rec.release == rel.name])
            labels[rel.name] = path
        say(f"      {len(records)} traces labelled in {timings['audit_s']:.1f}s")
    finally:
        collector.stop()

    say(f"[5/6] ragtrace compare: paired statistics, gates, HTML report (its full output: {log.name})")
    report_html = out / "report.html"
    compare_json = out / "compare.json"
    t = time.perf_counter()
    compare_args = ["--baseline", str(labels[cfg.baseline]), "--candidate", str(labels[cfg.candidate]),
                    "--html", str(report_html), "--json", str(compare_json), "--resamples", str(cfg.resamples),
                    "--seed", str(cfg.seed), "--max-ids", "3",
                    # kept in the store too, so the web dashboard shows this comparison's gates
                    "--save", "--store", str(store),
                    # movers link to the trace pages of this demo's server (`--keep-serving` keeps it up)
                    "--server-url", collector.url]
    # A child process, like the other store commands: --save opens the embedded store, and a process
    # holds one embedded store at most (the caller, e.g. a test session, may hold another). Its
    # tables go to demo.log: the summary below says what they found, the report shows all of it.
    proc = subprocess.run([sys.executable, "-m", "ragtrace_cli.main", "compare", *compare_args],
                          capture_output=True, text=True, timeout=1800)
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(f"$ ragtrace compare {' '.join(compare_args)}\n{proc.stdout}{proc.stderr}\n")
    if cfg.verbose:
        print(proc.stdout + proc.stderr, end="", flush=True)
    compare_exit = proc.returncode
    timings["compare_s"] = time.perf_counter() - t
    if compare_exit not in (0, 1):
        raise DemoError(f"ragtrace compare failed with exit code {compare_exit}; see {log}:\n"
                        f"{proc.stderr.strip()[-800:]}")
    tripped = _tripped_gates(compare_json)
    deciding = _deciding_statement(compare_json)
    all_records = [rec for p in labels.values() for rec in read_label_lines(p)]
    fault_check = check_labels(all_records, releases, corpus)
    (out / "fault_check.json").write_text(json.dumps(fault_check, indent=2) + "\n", encoding="utf-8")

    say("[6/6] review queue and a reviewer (`ragtrace review` / `ragtrace reviewers` on the stopped server's store)")
    _ragtrace(["review", "enqueue", "--queue", REVIEW_QUEUE, "--store", str(store), "--reviewers", "1",
               "--service", cfg.service, "--description", "ragtrace demo: flagged traces"], log)
    token_out = _ragtrace(["reviewers", "add", REVIEWER, "--store", str(store)], log)
    token = token_out.strip().splitlines()[-1].strip() if token_out.strip() else ""
    timings["total_s"] = time.perf_counter() - t0
    return DemoResult(out=out, store=store, collector_url=collector.url, report_html=report_html,
                      compare_json=compare_json, labels=labels, faults=faults_path, audit=report,
                      compare_exit=compare_exit, tripped_gates=tripped, fault_check=fault_check,
                      deciding_slice=deciding,
                      review_url=f"{collector.url}/review/login", reviewer_token=token, timings=timings)


def _tripped_gates(compare_json: Path) -> list[str]:
    try:
        data = json.loads(compare_json.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    out = []
    for g in data.get("gates", []):
        if isinstance(g, dict) and g.get("tripped"):
            out.append(f"{g.get('metric')} ({g.get('boundary')})" if g.get("boundary") else str(g.get("metric")))
    return out


def _deciding_statement(compare_json: Path) -> str:
    try:
        ds = json.loads(compare_json.read_text(encoding="utf-8")).get("deciding_slice") or {}
    except (OSError, ValueError, AttributeError):
        return ""
    return str(ds.get("statement", "")) if isinstance(ds, dict) and ds.get("tripped_gates") else ""


def print_summary(res: DemoResult, cfg: DemoConfig) -> None:
    """What the demo found and where to look, in about 25 lines: one table of the failure modes with
    the injected faults beside the labels they should get, the tripped gates and the deciding slice,
    then the files and URLs (everything else is in demo.log and the report)."""
    from rich.console import Console
    from rich.markup import escape

    con = Console(highlight=False)
    con.print(modes_table(res))
    if res.tripped_gates:  # metric names may be a traced service's own: text, never markup
        con.print(f"[bold red]Gates tripped[/bold red] (ragtrace compare exit code {res.compare_exit}): "
                  f"{escape(', '.join(res.tripped_gates))}")
    else:
        con.print(f"No gate tripped (ragtrace compare exit code {res.compare_exit}).")
    if res.deciding_slice:
        con.print(f"Deciding slice: {res.deciding_slice}", markup=False)
    sources = res.audit.get("gold_sources") if isinstance(res.audit, dict) else None
    if isinstance(sources, dict) and sources:
        con.print("Gold from:     " + ", ".join(f"{k} {v}" for k, v in sorted(sources.items()))
                  + "  (corpus/evidence.jsonl, resolved per release)")
    # Paths, URLs and commands are copied from here: printed as they are (a path is not rich markup)
    # and never broken across lines, whatever the terminal's width; the terminal wraps them if it must.
    def say(text: str) -> None:
        con.print(text, markup=False, soft_wrap=True)

    say(f"HTML report:   {res.report_html}")
    say(f"Labels:        {', '.join(str(p) for p in res.labels.values())}")
    say(f"Ground truth:  {res.faults}  (corpus in {res.out / 'corpus'})")
    say(f"Details:       {res.out / 'demo.log'}  (every step, the full ragtrace compare output; --verbose prints it)")
    say(f"Review queue:  {res.review_url}  (queue '{REVIEW_QUEUE}')")
    say(f"Web view:      {res.collector_url}/traces and {res.collector_url}/dashboard  (same login)")
    say(f"Reviewer token: {res.reviewer_token}")
    con.print(f"Took {res.timings.get('total_s', 0):.0f}s.")
    if not cfg.keep_serving:
        say(f"To click through the review queue: ragtrace serve --store {res.store} --port "
            f"{res.collector_url.rsplit(':', 1)[1]}   (or rerun with --keep-serving)")


def modes_table(res: DemoResult) -> Any:
    """Failure modes by release (the audit's labels), each beside the faults injected to cause it and
    how many of their queries were labelled so; ``ok`` beside the queries no fault touched."""
    from rich import box
    from rich.table import Table

    releases = list(res.labels)
    counts = {rel: dict.fromkeys(FAILURE_MODES, 0) for rel in releases}
    for rel, path in res.labels.items():
        for rec in read_label_lines(path):
            counts[rel][rec.failure_mode.value] += 1
    table = Table(title="Failure modes by release, beside the faults injected",
                  title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("failure mode")
    for rel in releases:
        table.add_column(rel, justify="right")
    table.add_column("injected")
    table.add_column("labelled so", justify="right")
    for mode in FAILURE_MODES:
        if mode == "ok":
            rows = [dict(res.fault_check["clean"], fault="(none)")]
        else:
            rows = [row for row in res.fault_check["modes"] if row["expected_mode"] == mode]
        hits, n = sum(r["hits"] for r in rows), sum(r["n"] for r in rows)
        injected = ", ".join(r["fault"] for r in rows) or "-"
        labelled = f"{hits} of {n} ({_pct(hits / n if n else None)})" if rows else "-"
        table.add_row(mode, *(str(counts[rel][mode]) for rel in releases), injected, labelled)
    return table


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def demo_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="ragtrace demo", description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--out", type=Path, help="output folder (default: a new temporary folder)")
    p.add_argument("--store", type=Path, help="embedded store directory (default: OUT/store)")
    p.add_argument("--docs", type=int, default=150, help="corpus size in documents (default 150)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--generator", choices=("extractive", "smollm2"), default="extractive",
                   help="extractive (fast, default) or the real SmolLM2-135M model (slow)")
    p.add_argument("--port", type=int, default=0, help="collector port (default: a free one)")
    p.add_argument("--keep-serving", action="store_true",
                   help="leave `ragtrace serve` running afterwards for the review UI (Ctrl-C stops it)")
    shown = p.add_mutually_exclusive_group()
    shown.add_argument("--quiet", action="store_true", help="only the final summary")
    shown.add_argument("--verbose", action="store_true",
                       help="also the progress and the full `ragtrace compare` output (always in OUT/demo.log)")
    a = p.parse_args(argv)
    if a.docs < 10:
        p.error("--docs must be at least 10 (the comparison needs queries to pair)")
    if not 0 <= a.port <= 65535:
        p.error(f"--port must be in 1..65535 (or 0 for a free one), got {a.port}")
    for flag, folder in (("--out", a.out), ("--store", a.store)):
        if folder is not None and folder.exists() and not folder.is_dir():
            p.error(f"{flag} {folder} is a file; give a directory (it is created when missing)")
    out = a.out or Path(tempfile.mkdtemp(prefix="ragtrace-demo-"))
    store = a.store if a.store is not None else out / "store"
    if store.exists() and not store.is_dir():
        p.error(f"{store} is a file; give another --out, or a --store directory")
    if store.exists() and any(store.iterdir()):
        p.error(f"{store} is not empty: the demo writes a fresh store; give a new --out or --store directory")
    cfg = DemoConfig(out=out, store=a.store, docs=a.docs, seed=a.seed, generator=a.generator, port=a.port,
                     keep_serving=a.keep_serving, quiet=a.quiet, verbose=a.verbose)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    def _interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    # Explicit handlers, so the collector child is always stopped: a demo started in the background
    # inherits SIGINT ignored, and SIGTERM would otherwise end this process without cleanup.
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        res = run_demo(cfg)
    except DemoError as exc:
        print(f"ragtrace demo: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("ragtrace demo: interrupted", file=sys.stderr)
        return 130
    print_summary(res, cfg)
    if cfg.keep_serving:
        port = int(res.collector_url.rsplit(":", 1)[1])
        collector = Collector(res.store, port, res.out / "collector.log")
        try:
            collector.start()
        except DemoError as exc:
            print(f"ragtrace demo: {exc}", file=sys.stderr)
            return 1
        print(f"\nServing {res.collector_url} (review UI at {res.review_url}); Ctrl-C to stop.", flush=True)

        try:
            collector.wait()
        except KeyboardInterrupt:
            collector.stop()
    return 0
