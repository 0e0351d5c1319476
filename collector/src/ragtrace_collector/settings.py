"""Collector settings: one frozen dataclass, each field naming its environment variable.

Precedence is argument > environment > default. A bad value raises `ValueError` naming the field
(or the environment variable) and the fix, wherever it came from: falling back to the default
would start a collector the operator did not configure (on port 4318 when $RAGTRACE_PORT was
mistyped, without authentication when $RAGTRACE_TOKENS was). A variable whose setting is also
given as an argument is not read.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ragtrace_store.clock import parse_duration
from ragtrace_store.records import DEFAULT_TENANT

ENV_STORE = "RAGTRACE_STORE"
ENV_HOST = "RAGTRACE_HOST"
ENV_PORT = "RAGTRACE_PORT"
ENV_TOKENS = "RAGTRACE_TOKENS"  # "token1=tenantA,token2=tenantB"
ENV_MAX_BODY_BYTES = "RAGTRACE_MAX_BODY_BYTES"
ENV_SPOOL_DIR = "RAGTRACE_SPOOL_DIR"
ENV_SPOOL_MAX_BYTES = "RAGTRACE_SPOOL_MAX_BYTES"
ENV_SPOOL_FSYNC = "RAGTRACE_SPOOL_FSYNC"
ENV_BATCH_MAX_SPANS = "RAGTRACE_BATCH_MAX_SPANS"
ENV_BATCH_INTERVAL = "RAGTRACE_BATCH_INTERVAL"
ENV_QUEUE_MAX_BYTES = "RAGTRACE_QUEUE_MAX_BYTES"
ENV_SHUTDOWN_TIMEOUT = "RAGTRACE_SHUTDOWN_TIMEOUT"
ENV_AUDIT_EVERY = "RAGTRACE_AUDIT_EVERY"
ENV_AUDIT_SAMPLE = "RAGTRACE_AUDIT_SAMPLE"
ENV_AUDIT_METRIC_SERVICES = "RAGTRACE_AUDIT_METRIC_SERVICES"
ENV_AUDIT_METRIC_RELEASES = "RAGTRACE_AUDIT_METRIC_RELEASES"
ENV_MAX_INFLIGHT_BYTES = "RAGTRACE_MAX_INFLIGHT_BYTES"
ENV_HEADER_TIMEOUT = "RAGTRACE_HEADER_TIMEOUT"
ENV_BODY_TIMEOUT = "RAGTRACE_BODY_TIMEOUT"
ENV_KEEP_ALIVE_TIMEOUT = "RAGTRACE_KEEP_ALIVE_TIMEOUT"
ENV_MAX_CONNECTIONS = "RAGTRACE_MAX_CONNECTIONS"
ENV_AUDIT_LABELLERS = "RAGTRACE_AUDIT_LABELLERS"  # "offline,nli:/models/deberta"
ENV_ALLOWED_HOSTS = "RAGTRACE_ALLOWED_HOSTS"  # "collector.internal,10.0.0.5" or "*"
ENV_ADMIN_TOKEN = "RAGTRACE_ADMIN_TOKEN"
ENV_EXPORT_LABELS = "RAGTRACE_EXPORT_LABELS"  # "http://otel-collector:4318"

#: settings whose value is never repeated in an error message
_SECRETS = frozenset({"tokens", "review_secret", "admin_token"})

DEFAULT_PORT = 4318  # the OTLP/HTTP port
MiB = 1024 * 1024



def parse_tokens(text: str) -> dict[str, str]:
    """``"tok1=tenantA,tok2=tenantB"`` → ``{token: tenant}``. A bare token maps to the default tenant."""
    out: dict[str, str] = {}
    # errors name an entry by its position, never by its text: a token is a secret and the message
    # goes to the terminal and the logs
    for n, item in enumerate(text.split(","), start=1):
        item = item.strip()
        if not item:
            continue
        token, sep, tenant = item.partition("=")
        token, tenant = token.strip(), tenant.strip() if sep else DEFAULT_TENANT
        if not token or not tenant:
            raise ValueError(f"invalid token entry {n} (of the comma-separated list): use TOKEN=TENANT, "
                             "comma-separated")
        if out.get(token, tenant) != tenant:  # else the last one would win without a word
            raise ValueError(f"token entry {n}: that token is already given for tenant {out[token]!r}; "
                             "one token selects one tenant")
        out[token] = tenant
    return out


def parse_names(text: str) -> tuple[str, ...]:
    """``"a, b,,c"`` → ``("a", "b", "c")``: a comma-separated list, blanks dropped (none left: ValueError)."""
    names = tuple(item.strip() for item in text.split(",") if item.strip())
    if not names:
        raise ValueError(f"no names in {text!r}: use a comma-separated list")
    return names


def default_spool_dir(store: str) -> Path:
    """Next to an embedded store (``<store>.spool``); under the per-user cache dir for a server URL."""
    if store.startswith(("http://", "https://")):
        base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
        return Path(base) / "ragtrace" / "spool"
    return Path(store).expanduser().resolve().with_name(Path(store).name + ".spool")


@dataclass(frozen=True)
class CollectorSettings:
    """Everything `ragtrace serve` can be told. Units: bytes, seconds, spans."""

    #: store directory (embedded chDB) or ``http(s)://user:pw@host:8123/db`` ($RAGTRACE_STORE)
    store: str = ""
    host: str = "127.0.0.1"  # $RAGTRACE_HOST
    port: int = DEFAULT_PORT  # $RAGTRACE_PORT
    #: bearer token → tenant ($RAGTRACE_TOKENS="tok=tenant,..."); empty = no auth, tenant "default"
    tokens: Mapping[str, str] = field(default_factory=dict)
    #: largest accepted request body, compressed or not ($RAGTRACE_MAX_BODY_BYTES). The OTLP
    #: exporter itself drops batches over 64 MiB.
    max_body_bytes: int = 64 * MiB
    #: write-ahead spool directory ($RAGTRACE_SPOOL_DIR); default next to the store
    spool_dir: str = ""
    #: refuse new data (503) once the spool holds this much ($RAGTRACE_SPOOL_MAX_BYTES)
    spool_max_bytes: int = 4096 * MiB
    #: fsync the spool before acknowledging (group-committed). Off: survives kill -9 of the
    #: collector but not a machine crash ($RAGTRACE_SPOOL_FSYNC=0)
    spool_fsync: bool = True
    #: a batch is written when it holds this many spans ... ($RAGTRACE_BATCH_MAX_SPANS)
    batch_max_spans: int = 8000
    #: ... or this many seconds after its first span arrived ($RAGTRACE_BATCH_INTERVAL)
    batch_interval: float = 0.5
    #: decoded rows not yet written; beyond it requests get 429 ($RAGTRACE_QUEUE_MAX_BYTES). They count
    #: in max_inflight_bytes too, so by default only that bound applies: rows are counted by what they
    #: hold, and a 64 MiB request of 64 KB values holds 128 MiB of rows (two such back to back, one
    #: written while the other decodes, must not be refused for this one)
    queue_max_bytes: int = 512 * MiB
    #: bytes held for clients at once: request bodies being received, what their decodes hold
    #: (counted from the body before it is decoded: `request_cost`), and decoded rows waiting for
    #: the store. A request whose Content-Length does not fit gets 429 before its body is read, one
    #: that outgrows it while arriving or whose decode does not fit too; one whose decode could not
    #: fit even alone gets 413 ($RAGTRACE_MAX_INFLIGHT_BYTES). At least max_body_bytes; the default
    #: holds a 64 MiB request of ordinary traces with its decode (about 4.5 x its bytes at most).
    max_inflight_bytes: int = 512 * MiB
    #: seconds a connection may take to send a request's line and headers, counted from its
    #: start or from the previous response ($RAGTRACE_HEADER_TIMEOUT); then it is closed
    header_timeout: float = 10.0
    #: seconds any request may take to send its body, counted from its headers ($RAGTRACE_BODY_TIMEOUT);
    #: then 408 and the connection closed (`ragtrace_collector.body_deadline`)
    body_timeout: float = 30.0
    #: seconds an idle keep-alive connection stays open ($RAGTRACE_KEEP_ALIVE_TIMEOUT)
    keep_alive_timeout: float = 5.0
    #: open connections at most ($RAGTRACE_MAX_CONNECTIONS); more are closed when accepted, and
    #: requests get 503 while this many are open. Lowered to fit the open-files limit.
    max_connections: int = 4096
    #: SIGTERM: the process has left within this, whatever is in flight (`ragtrace_collector.shutdown`:
    #: requests get half of it, then are cut; the writer flushes until just before it; the rest stays
    #: in the spool)
    shutdown_timeout: float = 10.0
    #: run `run_audit` every this many seconds in the background (0 = never)
    audit_every: float = 0.0
    audit_sample: int = 200
    #: the periodic audit's metrics keep the newest this many services of a tenant and releases of a
    #: service (a sender names them, so /metrics stays bounded: docs/audit-metrics.md)
    #: ($RAGTRACE_AUDIT_METRIC_SERVICES, $RAGTRACE_AUDIT_METRIC_RELEASES)
    audit_metric_services: int = 20
    audit_metric_releases: int = 5
    #: helper processes that decode and assemble requests (0 = in the serving process); the walk
    #: over span attributes is the largest CPU cost and holds the GIL ($RAGTRACE_INGEST_WORKERS)
    ingest_workers: int = 0
    #: ClickHouse cluster name: migrations use the clustered schema (ON CLUSTER, Replicated +
    #: Distributed) when set ($RAGTRACE_CLUSTER)
    cluster: str = ""
    #: cookie-signing key of the review UI ($RAGTRACE_REVIEW_SECRET, read by the review module)
    review_secret: str = ""
    #: the labeller names `POST /api/audit` may ask for ($RAGTRACE_AUDIT_LABELLERS); a request names
    #: one of these or is refused, so what code runs and which URL is called is the operator's choice
    audit_labellers: tuple[str, ...] = ("offline",)
    #: Host header values answered ($RAGTRACE_ALLOWED_HOSTS; "*" = any). Empty: the loopback
    #: names and ``host`` itself. Checked without tokens (a DNS-rebinding page has no token to
    #: send), and with tokens too when set explicitly.
    allowed_hosts: tuple[str, ...] = ()
    #: credential of the reviewer administration API (/api/reviewers) when no tenant tokens are
    #: configured ($RAGTRACE_ADMIN_TOKEN); unset, that API is closed and reviewers are managed with
    #: direct store access (`ragtrace reviewers ... --store`)
    admin_token: str = ""
    #: the OTLP/HTTP receiver every label the server's audits write is also sent to, as an
    #: OpenTelemetry evaluation event on its trace ($RAGTRACE_EXPORT_LABELS; empty: none). Checked
    #: by the evaluator's label export, which the collector does not import
    export_labels: str = ""

    def __post_init__(self) -> None:
        positive = ("max_body_bytes", "spool_max_bytes", "batch_max_spans", "queue_max_bytes", "audit_sample",
                    "audit_metric_services", "audit_metric_releases",
                    "max_inflight_bytes", "max_connections")
        for name in positive:
            if int(getattr(self, name)) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        if not 0 < self.port < 65536 and self.port != 0:
            raise ValueError(f"port must be in 1..65535 (or 0 for any free port), got {self.port}")
        if self.ingest_workers < 0:
            raise ValueError(f"ingest_workers must be >= 0, got {self.ingest_workers}")
        # each duration by its own name and value: a message naming three of them left the reader to
        # guess which one was refused
        for name in ("batch_interval", "shutdown_timeout", "header_timeout", "body_timeout", "keep_alive_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0 seconds, got {getattr(self, name)!r}")
        if not self.audit_every >= 0:
            raise ValueError(f"audit_every must be >= 0 seconds (0 = no background audit), got {self.audit_every!r}")
        if self.max_inflight_bytes < self.max_body_bytes:
            raise ValueError(f"max_inflight_bytes ({self.max_inflight_bytes}) must be >= max_body_bytes "
                             f"({self.max_body_bytes}), or the largest request could never be admitted: raise "
                             "--max-inflight-bytes or lower --max-body-bytes")
        if not self.audit_labellers or any(not n.strip() or "," in n for n in self.audit_labellers):
            raise ValueError(f"audit_labellers must name at least one labeller, got {self.audit_labellers!r}: "
                             "e.g. --audit-labellers offline,nli:/models/deberta")
        if any(not h.strip() or "/" in h or "," in h for h in self.allowed_hosts):
            raise ValueError(f"allowed_hosts must be host names or addresses without scheme or path, got "
                             f"{self.allowed_hosts!r}: e.g. --allowed-hosts collector.internal,10.0.0.5")

    @property
    def spool_path(self) -> Path:
        return Path(self.spool_dir).expanduser() if self.spool_dir else default_spool_dir(self.store)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> CollectorSettings:
        """Settings from the environment, then ``overrides`` (arguments win; None means unset)."""
        from ragtrace_store.client import default_store_path

        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        readers: dict[str, tuple[str, Any]] = {
            "host": (ENV_HOST, str),
            "port": (ENV_PORT, _parse_count),
            "tokens": (ENV_TOKENS, parse_tokens),
            "max_body_bytes": (ENV_MAX_BODY_BYTES, _parse_count),
            "spool_dir": (ENV_SPOOL_DIR, str),
            "spool_max_bytes": (ENV_SPOOL_MAX_BYTES, _parse_count),
            "spool_fsync": (ENV_SPOOL_FSYNC, _parse_bool),
            "batch_max_spans": (ENV_BATCH_MAX_SPANS, _parse_count),
            "batch_interval": (ENV_BATCH_INTERVAL, parse_duration),
            "queue_max_bytes": (ENV_QUEUE_MAX_BYTES, _parse_count),
            "max_inflight_bytes": (ENV_MAX_INFLIGHT_BYTES, _parse_count),
            "header_timeout": (ENV_HEADER_TIMEOUT, parse_duration),
            "body_timeout": (ENV_BODY_TIMEOUT, parse_duration),
            "keep_alive_timeout": (ENV_KEEP_ALIVE_TIMEOUT, parse_duration),
            "max_connections": (ENV_MAX_CONNECTIONS, _parse_count),
            "shutdown_timeout": (ENV_SHUTDOWN_TIMEOUT, parse_duration),
            "audit_every": (ENV_AUDIT_EVERY, parse_duration),
            "audit_sample": (ENV_AUDIT_SAMPLE, _parse_count),
            "audit_metric_services": (ENV_AUDIT_METRIC_SERVICES, _parse_count),
            "audit_metric_releases": (ENV_AUDIT_METRIC_RELEASES, _parse_count),
            "review_secret": ("RAGTRACE_REVIEW_SECRET", str),
            "cluster": ("RAGTRACE_CLUSTER", str),
            "ingest_workers": ("RAGTRACE_INGEST_WORKERS", _parse_count),
            "audit_labellers": (ENV_AUDIT_LABELLERS, parse_names),
            "allowed_hosts": (ENV_ALLOWED_HOSTS, parse_names),
            "admin_token": (ENV_ADMIN_TOKEN, str),
            "export_labels": (ENV_EXPORT_LABELS, str),
        }
        for name, (var, parse) in readers.items():
            raw = env.get(var)
            if raw is None or raw == "" or overrides.get(name) is not None:
                continue
            try:
                values[name] = parse(raw)
            except ValueError as exc:
                shown = var if name in _SECRETS else f"{var}={raw!r}"
                raise ValueError(f"{shown}: {exc}; fix or unset it (the collector does not start with "
                                 "a setting it could not read)") from None
        values["store"] = env.get(ENV_STORE) or str(default_store_path())
        known = {f.name for f in fields(cls)}
        for name, value in overrides.items():
            if name not in known:
                raise ValueError(f"unknown collector setting {name!r}")
            if value is not None:
                values[name] = value
        return cls(**values)


def _parse_count(text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError("not a whole number") from None


def _parse_bool(text: str) -> bool:
    low = text.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"invalid boolean {text!r}: use 1/0, true/false")
