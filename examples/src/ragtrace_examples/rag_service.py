"""The example RAG service: FastAPI + ragtrace middleware + the instrumented pipeline.

    python -m ragtrace_examples.rag_service --endpoint http://127.0.0.1:4318 --release v1 --port 8000
    curl -s localhost:8000/ask -H 'content-type: application/json' \\
         -d '{"question": "How many people work for Hepround Energy?"}'

``POST /ask`` answers with the chunk ids it used and the trace id (also in the ``x-trace-id``
response header, set by `ragtrace.asgi.RagtraceMiddleware`). ``GET /questions`` lists the golden
questions of the generated corpus, for traffic. ``--release candidate`` serves the release with
injected faults; ``--generator smollm2`` answers with the real SmolLM2-135M model.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, HTTPException
from pydantic import BaseModel, Field

from ragtrace.asgi import RagtraceMiddleware
from ragtrace_examples.pipeline import RagPipeline

__all__ = ["create_app", "main", "serve_in_thread"]

TRACE_ID_HEADER = "x-trace-id"


class AskRequest(BaseModel):
    question: str = Field(min_length=1, max_length=2000)
    query_id: str | None = Field(default=None, max_length=200,
                                 description="id of a golden question (evaluation traffic)")


class AskResponse(BaseModel):
    answer: str
    query_id: str | None
    #: chunk ids supplied to the generator, in order
    document_ids: list[str]
    #: chunk ids the retriever returned, before reranking
    candidate_ids: list[str]
    trace_id: str | None
    release: str


def create_app(pipeline: RagPipeline) -> FastAPI:
    """The service's FastAPI app around one pipeline (one release)."""
    app = FastAPI(title="ragtrace example RAG service", version=pipeline.release.name)

    @app.post("/ask", response_model=AskResponse)
    def ask(req: AskRequest) -> AskResponse:  # sync: FastAPI runs it in its thread pool
        if req.query_id is not None and req.query_id not in pipeline.gold:
            raise HTTPException(404, f"unknown query_id {req.query_id!r}: see GET /questions")
        a = pipeline.ask(req.question, query_id=req.query_id)
        return AskResponse(answer=a.answer, query_id=a.query_id, document_ids=list(a.context_ids),
                           candidate_ids=list(a.candidate_ids), trace_id=a.trace_id, release=a.release)

    @app.get("/questions")
    def questions(limit: int = 100) -> list[dict[str, str]]:
        return [{"query_id": q.id, "question": q.question} for q in pipeline.corpus.questions[:limit]]

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok", "release": pipeline.release.name}

    app.add_middleware(RagtraceMiddleware, trace_id_header=TRACE_ID_HEADER, exclude_paths=["/healthz"])
    return app


def serve_in_thread(app: Any, host: str = "127.0.0.1", port: int = 0) -> tuple[str, Callable[[], None]]:
    """Run ``app`` with uvicorn on a background thread. Returns its base URL and a stop function."""
    import socket

    import uvicorn

    if port == 0:
        with socket.socket() as s:
            s.bind((host, 0))
            port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, name=f"example-service-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the example service did not start on {host}:{port}")
        time.sleep(0.05)

    def stop() -> None:
        server.should_exit = True
        thread.join(timeout=10)

    return f"http://{host}:{port}", stop


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ragtrace_examples.rag_service",
                                description="The example RAG service over a generated corpus.")
    p.add_argument("--endpoint", help="ragtrace collector URL (default: $RAGTRACE_ENDPOINT; none = no tracing)")
    p.add_argument("--service", default="example-rag")
    p.add_argument("--release", default="v1", help="release name; 'candidate' or a name with --faults injects faults")
    p.add_argument("--faults", action="store_true", help="inject the default faults (see ragtrace_examples.faults)")
    p.add_argument("--docs", type=int, default=200, help="corpus size (documents)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--generator", choices=("extractive", "smollm2"), default="extractive")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    a = p.parse_args(argv)

    import uvicorn

    import ragtrace
    from ragtrace_examples.corpus import generate_corpus
    from ragtrace_examples.faults import baseline_release, candidate_release

    corpus = generate_corpus(a.docs, seed=a.seed)
    faulty = a.faults or a.release == "candidate"
    # the same candidate as the demo: its chunker re-cuts the whole index, as a real chunker change does
    release = (candidate_release(corpus, a.release, seed=a.seed, recut_index=True) if faulty
               else baseline_release(a.release))
    if a.endpoint:
        ragtrace.configure(endpoint=a.endpoint, service=a.service, release=release.name)
    pipeline = RagPipeline(corpus, release, generator=a.generator)
    print(f"{a.service} {release.name}: {len(corpus.documents)} documents, {len(corpus.questions)} golden "
          f"questions; {release.description}; http://{a.host}:{a.port}/ask", file=sys.stderr)
    uvicorn.run(create_app(pipeline), host=a.host, port=a.port, log_level="warning")
    ragtrace.shutdown()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
