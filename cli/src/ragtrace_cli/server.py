"""The serving process, assembled: ingest (`ragtrace_collector`) + the review UI (`ragtrace_review`)
+ the audit API and background audit (`ragtrace_evaluator`).

This is the only place the three meet. Ingest knows nothing of the layers above it; the review
UI and the evaluator are optional here, so `ragtrace serve` runs (without them) when their
dependencies are not installed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from functools import partial, update_wrapper
from typing import TYPE_CHECKING, Literal

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.concurrency import run_in_threadpool

from ragtrace_cli.label_export import LabelExport, label_export
from ragtrace_collector.app import BackgroundTask, Extension, TenantDep, create_app
from ragtrace_collector.metrics import Metrics
from ragtrace_collector.otlp import JSON
from ragtrace_collector.settings import CollectorSettings
from ragtrace_store import DEFAULT_TENANT, Store, utc_now

if TYPE_CHECKING:  # the review UI is optional here
    from ragtrace_review.local_admin import LocalAdmin

log = logging.getLogger("ragtrace.collector")


def build_app(settings: CollectorSettings, store: Store, *, metrics: Metrics | None = None,
              local_admin: LocalAdmin | None = None) -> FastAPI:
    """The `ragtrace serve` app for ``store`` (which the caller opened and closes); ``local_admin``
    (`ragtrace_review.local_admin`, which the caller closes) opens its reviewer administration to the
    user running it."""
    metrics = metrics or Metrics()
    # --export-labels: every audit below hands its labels to the one exporter (ragtrace_cli.label_export)
    export = label_export(settings, metrics)
    extensions: list[Extension] = [update_wrapper(partial(mount_audit_api, export=export), mount_audit_api),
                                   mount_anchor_api]
    background: list[BackgroundTask] = (
        [update_wrapper(partial(audit_loop, export=export), audit_loop)] if settings.audit_every > 0 else [])
    if export is not None:
        background.append(export.close_when_stopped)
    try:
        from ragtrace_review import web as review_web
    except ImportError as exc:
        if exc.name not in ("ragtrace_review", "ragtrace_review.web"):
            raise
        log.info("review UI not available: %s", exc)
    else:
        extensions.append(update_wrapper(partial(review_web.mount, local_admin=local_admin), review_web.mount))
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


def mount_audit_api(app: FastAPI, get_store: Callable[[], Store], settings: CollectorSettings, *,
                    export: LabelExport | None = None) -> None:
    """``POST /api/audit``: run an audit of the caller's tenant inside the serving process (the
    only process that may open an embedded store while it serves); its labels go to ``export`` too."""
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
            report = await run_in_threadpool(lambda: run_audit(
                store, tenant=tenant, on_labels=export.hand_over(tenant) if export else None, **options.model_dump()))
        except ValueError as exc:  # AuditError: what to change
            return JSONResponse({"error": str(exc)}, status_code=400)
        return Response(orjson.dumps(report, default=str), media_type=JSON)


#: seconds a periodic audit's window ends before the audit starts: an SDK exports a span up to 5 s
#: after it ends (BatchSpanProcessor's default delay), the collector writes it within its batch interval
WINDOW_SETTLE = 15.0


#: the largest `POST /api/anchor` body
ANCHOR_BODY_MAX_BYTES = 8 * 1024


def mount_anchor_api(app: FastAPI, get_store: Callable[[], Store], settings: CollectorSettings) -> None:
    """The caller's tenant's drift anchors through the serving process (`ragtrace anchor --server`):
    ``GET /api/anchor`` lists them; ``POST /api/anchor`` sets one from ``{"service", "release"}`` or
    ``{"service", "from", "to"}`` (ISO 8601 with a zone); ``POST /api/anchor/clear`` with
    ``{"service"}`` clears one. Refusals are 400 with what to give instead."""
    from ragtrace_store.anchors import AnchorError, clear_anchor, list_anchors, set_anchor

    store = get_store()

    async def body_of(request: Request, allowed: set[str]) -> dict[str, str]:
        raw = b""
        async for chunk in request.stream():
            raw += chunk
            if len(raw) > ANCHOR_BODY_MAX_BYTES:
                raise AnchorError(f"anchor body over {ANCHOR_BODY_MAX_BYTES} bytes")
        try:
            data = orjson.loads(raw or b"{}")
        except orjson.JSONDecodeError as exc:
            raise AnchorError(f"body must be a JSON object: {exc}") from None
        if not isinstance(data, dict) or any(not isinstance(v, str) for v in data.values()):
            raise AnchorError(f"body must be a JSON object of strings with the keys {sorted(allowed)}")
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise AnchorError(f"unknown keys {unknown}; allowed: {sorted(allowed)}")
        return data

    def when(data: dict[str, str], key: str) -> datetime | None:
        if key not in data:
            return None
        try:
            return datetime.fromisoformat(data[key])
        except ValueError:
            raise AnchorError(f"{key} {data[key][:60]!r} is not an ISO 8601 time, e.g. 2026-05-01T00:00Z") from None

    @app.get("/api/anchor")
    def anchors(tenant: TenantDep) -> Response:
        return Response(orjson.dumps([a.to_json() for a in list_anchors(store, tenant=tenant)]), media_type=JSON)

    @app.post("/api/anchor")
    async def set_one(request: Request, tenant: TenantDep) -> Response:
        try:
            data = await body_of(request, {"service", "release", "from", "to"})
            anchor = await run_in_threadpool(lambda: set_anchor(
                store, tenant=tenant, service=data.get("service", ""), release=data.get("release"),
                start=when(data, "from"), end=when(data, "to")))
        except AnchorError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        return Response(orjson.dumps(anchor.to_json()), media_type=JSON)

    @app.post("/api/anchor/clear")
    async def clear_one(request: Request, tenant: TenantDep) -> Response:
        try:
            data = await body_of(request, {"service"})
        except AnchorError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        service = data.get("service", "")
        cleared = await run_in_threadpool(lambda: clear_anchor(store, tenant=tenant, service=service))
        return JSONResponse({"service": service, "cleared": cleared})


def audit_loop(store: Store, settings: CollectorSettings, metrics: Metrics, stop: threading.Event, *,
               export: LabelExport | None = None) -> None:
    """`ragtrace serve --audit-every`: every interval, audit a sample of each tenant's traces of the
    interval just past (`ragtrace_evaluator.audit.periodic`), judge its drift against the previous
    window and the anchor, and expose the figures on /metrics (`AuditGauges`).

    A window ends `WINDOW_SETTLE` before the audit starts (at most half an interval), so the traces
    of its last seconds have reached the store. Windows follow one another without overlap: the first
    after a start goes on from the newest window the store holds when that ended less than an
    interval ago, else it covers one interval."""
    try:
        from ragtrace_evaluator.audit.audit_gauges import AuditGauges
        from ragtrace_evaluator.audit.periodic import Limits, run_periodic_audit
    except ImportError as exc:
        log.error("--audit-every needs the evaluator (%s): pip install 'ragtrace[evaluator]'", exc.name)
        return
    tenants = sorted(set(settings.tokens.values())) or [DEFAULT_TENANT]
    gauges = AuditGauges(settings.audit_every)
    metrics.register_rendered(gauges.exposition)
    for tenant in tenants:
        try:
            gauges.restore(store, tenant)
        except Exception:  # the metrics come back with the next audit
            log.exception("could not read tenant %s's last audit window from the store", tenant)
    limits = Limits(releases=settings.audit_metric_releases, services=settings.audit_metric_services)
    every = timedelta(seconds=settings.audit_every)
    settle = timedelta(seconds=min(WINDOW_SETTLE, settings.audit_every / 2))
    while not stop.wait(settings.audit_every):
        for tenant in tenants:
            end = utc_now() - settle
            start = end - every
            previous_end = gauges.window_end(tenant)
            if previous_end is not None and start < previous_end < end:
                start = previous_end
            try:
                result = run_periodic_audit(store, tenant=tenant, start=start, end=end,
                                            sample=settings.audit_sample, limits=limits,
                                            on_labels=export.hand_over(tenant) if export else None)
                gauges.update(result, succeeded_at=time.time())
                metrics.inc("ragtrace_audit_runs_total", tenant=tenant, outcome="ok")
                log.info("periodic audit of tenant %s, %s to %s: %d labelled traces in %d services",
                         tenant, start.isoformat(), end.isoformat(), sum(c.labels for c in result.services),
                         len(result.services))
            except Exception:
                metrics.inc("ragtrace_audit_runs_total", tenant=tenant, outcome="error")
                log.exception("periodic audit of tenant %s failed", tenant)
