"""The serving process, assembled: ingest (`ragtrace_collector`) + the review UI (`ragtrace_review`)
+ the audit API and background audit (`ragtrace_evaluator`).

This is the only place the three meet. Ingest knows nothing of the layers above it; the review
UI and the evaluator are optional here, so `ragtrace serve` runs (without them) when their
dependencies are not installed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Literal

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError
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


#: the largest `POST /api/audit` body: a few options, never data
AUDIT_BODY_MAX_BYTES = 64 * 1024
#: `relevance_labeller` value that means "no relevance labeller"; always allowed (it runs nothing)
NO_LABELLER = "none"


class AuditOptions(BaseModel):
    """The options `POST /api/audit` accepts: the documented subset of `run_audit`'s, with checked
    types and ranges. No tenant (the token decides it), no file path (`per_trace`), no labeller
    object; labeller names are checked against the server's `audit_labellers` by `audit_options`."""

    model_config = ConfigDict(extra="forbid", strict=True)

    service: str | None = Field(None, max_length=512)
    release: str | None = Field(None, max_length=512)
    #: ISO time or an age such as -1h (parsed by run_audit)
    since: str | None = Field(None, max_length=64)
    until: str | None = Field(None, max_length=64)
    sample: int | None = Field(None, ge=1, le=10_000_000)
    rate: float | None = Field(None, gt=0.0, le=1.0)
    stratify: str | None = Field(None, max_length=64)
    #: "i/n"
    shard: str | None = Field(None, max_length=32)
    #: `ragtrace_evaluator.audit.sampling.SAMPLERS`; 1 reproduces samples of manifests that name none
    sampler: Literal[1, 2] = 2
    stages: Literal["retrieval", "all"] = "all"
    labeller: str = Field("offline", max_length=1000)
    relevance_labeller: str | None = Field("offline", max_length=1000)
    resume: bool = True
    batch_size: int = Field(32, ge=1, le=4096)
    return_records: bool = False


class AuditOptionsError(ValueError):
    """A `POST /api/audit` body that is refused; the message names the option and the fix."""


def audit_options(body: bytes, enabled: Sequence[str]) -> AuditOptions:
    """The validated options of a `POST /api/audit` body. A labeller is accepted only by a name in
    ``enabled`` (the server's configuration), so a request can never make the server import a
    module (``py:``) or send passages to a URL (``llm:MODEL@URL``) it picked itself."""
    try:
        raw = orjson.loads(body or b"{}")
    except orjson.JSONDecodeError as exc:
        raise AuditOptionsError(f"body must be a JSON object of audit options: {exc}") from None
    if not isinstance(raw, dict):
        raise AuditOptionsError("body must be a JSON object of audit options")
    allowed = sorted(AuditOptions.model_fields)
    unknown = sorted(str(k) for k in raw if k not in AuditOptions.model_fields)
    if unknown:
        why = " (the tenant is the token's)" if "tenant" in unknown else ""
        raise AuditOptionsError(f"invalid audit options: unknown {unknown}{why}; allowed: {allowed}")
    try:
        options = AuditOptions.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors())
        raise AuditOptionsError(f"invalid audit options: {problems}") from None
    names = {"labeller": options.labeller, "relevance_labeller": options.relevance_labeller}
    for option, name in names.items():
        if name is None or (option == "relevance_labeller" and name == NO_LABELLER):
            continue
        if name not in enabled:
            raise AuditOptionsError(
                f"{option} {name[:100]!r} is not enabled on this server; enabled: {', '.join(enabled)} "
                "(the server's operator enables more with --audit-labellers / RAGTRACE_AUDIT_LABELLERS)")
    return options


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
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > AUDIT_BODY_MAX_BYTES:
                return JSONResponse({"error": f"audit options over {AUDIT_BODY_MAX_BYTES} bytes"}, status_code=413)
        try:
            options = audit_options(body, settings.audit_labellers)
        except AuditOptionsError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        try:
            report = await run_in_threadpool(lambda: run_audit(store, tenant=tenant, **options.model_dump()))
        except ValueError as exc:  # AuditError: what to change
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
