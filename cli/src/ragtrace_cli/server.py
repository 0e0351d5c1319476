"""The serving process, assembled: ingest (`ragtrace_collector`) + the review UI (`ragtrace_review`)
+ the audit API and background audit (`ragtrace_evaluator`).

This is the only place the three meet. Ingest knows nothing of the layers above it; the review
UI and the evaluator are optional here, so `ragtrace serve` runs (without them) when their
dependencies are not installed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from ragtrace_collector.app import BackgroundTask, Extension, TenantDep, create_app
from ragtrace_collector.metrics import Metrics
from ragtrace_collector.otlp import JSON
from ragtrace_collector.settings import CollectorSettings
from ragtrace_store import DEFAULT_TENANT, Store

log = logging.getLogger("ragtrace.collector")


def build_app(settings: CollectorSettings, store: Store, *, metrics: Metrics | None = None) -> FastAPI:
    """The `ragtrace serve` app for ``store`` (which the caller opened and closes)."""
    extensions: list[Extension] = [mount_audit_api]
    background: list[BackgroundTask] = [audit_loop] if settings.audit_every > 0 else []
    try:
        from ragtrace_review import web as review_web
    except ImportError as exc:
        if exc.name not in ("ragtrace_review", "ragtrace_review.web"):
            raise
        log.info("review UI not available: %s", exc)
    else:
        extensions.append(review_web.mount)
    return create_app(settings, store, metrics=metrics, extensions=extensions, background=background)


def mount_audit_api(app: FastAPI, get_store: Callable[[], Store], settings: CollectorSettings) -> None:
    """``POST /api/audit``: run an audit of the caller's tenant inside the serving process (the
    only process that may open an embedded store while it serves)."""
    store = get_store()

    @app.post("/api/audit")
    async def audit(request: Request, tenant: TenantDep) -> Response:
        try:
            from ragtrace_evaluator.audit.run import run_audit
        except ImportError as exc:
            return JSONResponse({"error": f"the evaluator is not installed ({exc.name}): "
                                          "pip install 'ragtrace[evaluator]'"}, status_code=501)
        try:
            options = orjson.loads(await request.body() or b"{}")
        except orjson.JSONDecodeError as exc:
            return JSONResponse({"error": f"body must be a JSON object of audit options: {exc}"}, status_code=400)
        if not isinstance(options, dict):
            return JSONResponse({"error": "body must be a JSON object of audit options"}, status_code=400)
        options.pop("tenant", None)  # a caller never picks another tenant
        options.pop("per_trace", None)  # no server-side file writes on a client's say-so
        try:
            report = await run_in_threadpool(lambda: run_audit(store, tenant=tenant, **options))
        except TypeError as exc:
            return JSONResponse({"error": f"invalid audit options: {exc}"}, status_code=400)
        except ValueError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        return Response(orjson.dumps(report, default=str), media_type=JSON)


def audit_loop(store: Store, settings: CollectorSettings, metrics: Metrics, stop: threading.Event) -> None:
    """`ragtrace serve --audit-every`: audit a sample of each tenant's traces periodically."""
    try:
        from ragtrace_evaluator.audit.run import run_audit
    except ImportError as exc:
        log.error("--audit-every needs the evaluator (%s): pip install 'ragtrace[evaluator]'", exc.name)
        return
    tenants = sorted(set(settings.tokens.values())) or [DEFAULT_TENANT]
    while not stop.wait(settings.audit_every):
        for tenant in tenants:
            try:
                report = run_audit(store, tenant=tenant, sample=settings.audit_sample)
                metrics.inc("ragtrace_audit_runs_total", outcome="ok")
                log.info("background audit of tenant %s: %s traces", tenant, report.get("n", "?"))
            except Exception:
                metrics.inc("ragtrace_audit_runs_total", outcome="error")
                log.exception("background audit of tenant %s failed", tenant)
