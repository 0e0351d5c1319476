"""Settings of the SDK: one frozen dataclass, resolved argument > environment > default.

A bad *argument* to ``configure()`` raises ``ValueError`` naming the argument and the fix: it is a
programming error found at start-up. A bad *environment* value is logged once and its default used,
because a typo in a deployment must not take the service down.

Environment variables (each documented in README "SDK"):

==============================  =====================================================  ==================
variable                        meaning                                                default
==============================  =====================================================  ==================
``RAGTRACE_ENABLED``            ``false`` turns the SDK into a no-op                   ``true``
``RAGTRACE_ENDPOINT``           OTLP/HTTP base URL; spans go to ``<endpoint>/v1/traces``  OTEL vars, then
                                                                                       ``http://localhost:4318``
``RAGTRACE_SERVICE``            resource ``service.name``                              ``OTEL_SERVICE_NAME``
``RAGTRACE_RELEASE``            resource ``service.version``                           unset
``RAGTRACE_ENVIRONMENT``        resource ``deployment.environment.name``               unset
``RAGTRACE_SAMPLE_RATE``        share of queries kept, by trace id, in [0, 1]          ``1.0``
``RAGTRACE_CONTENT``            ``full`` | ``N`` | ``truncate:N`` | ``hash``           ``full``
``RAGTRACE_REDACT``             ``module:function`` applied to all text                unset
``RAGTRACE_HEADERS``            ``k=v,k2=v2`` sent with every export                   OTEL headers vars
``RAGTRACE_COMPRESSION``        ``gzip`` | ``none``                                    ``none``
``RAGTRACE_MAX_QUEUE_SIZE``     spans buffered before new ones are dropped             ``8192``
``RAGTRACE_MAX_EXPORT_BATCH``   spans per export request                               ``256``
``RAGTRACE_SCHEDULE_DELAY_MS``  longest wait before a partial batch is exported        ``1000``
``RAGTRACE_EXPORT_TIMEOUT_MS``  time budget of one export request including retries   ``10000``
``RAGTRACE_SHUTDOWN_TIMEOUT_MS``  bound on the flush at shutdown / exit                ``1000``
==============================  =====================================================  ==================
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import unquote

from ragtrace import semconv as sc

_log = logging.getLogger("ragtrace")

ENV_ENABLED: Final = "RAGTRACE_ENABLED"
ENV_ENDPOINT: Final = "RAGTRACE_ENDPOINT"
ENV_SERVICE: Final = "RAGTRACE_SERVICE"
ENV_RELEASE: Final = "RAGTRACE_RELEASE"
ENV_ENVIRONMENT: Final = "RAGTRACE_ENVIRONMENT"
ENV_SAMPLE_RATE: Final = "RAGTRACE_SAMPLE_RATE"
ENV_CONTENT: Final = "RAGTRACE_CONTENT"
ENV_REDACT: Final = "RAGTRACE_REDACT"
ENV_HEADERS: Final = "RAGTRACE_HEADERS"
ENV_COMPRESSION: Final = "RAGTRACE_COMPRESSION"
ENV_MAX_QUEUE_SIZE: Final = "RAGTRACE_MAX_QUEUE_SIZE"
ENV_MAX_EXPORT_BATCH: Final = "RAGTRACE_MAX_EXPORT_BATCH"
ENV_SCHEDULE_DELAY_MS: Final = "RAGTRACE_SCHEDULE_DELAY_MS"
ENV_EXPORT_TIMEOUT_MS: Final = "RAGTRACE_EXPORT_TIMEOUT_MS"
ENV_SHUTDOWN_TIMEOUT_MS: Final = "RAGTRACE_SHUTDOWN_TIMEOUT_MS"

# Standard OpenTelemetry variables that keep working when the RAGTRACE_* one is unset.
OTEL_ENDPOINT: Final = "OTEL_EXPORTER_OTLP_ENDPOINT"
OTEL_TRACES_ENDPOINT: Final = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
OTEL_HEADERS: Final = "OTEL_EXPORTER_OTLP_HEADERS"
OTEL_TRACES_HEADERS: Final = "OTEL_EXPORTER_OTLP_TRACES_HEADERS"
OTEL_COMPRESSION: Final = "OTEL_EXPORTER_OTLP_COMPRESSION"
OTEL_TRACES_COMPRESSION: Final = "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION"
OTEL_SERVICE_NAME: Final = "OTEL_SERVICE_NAME"
OTEL_RESOURCE_ATTRIBUTES: Final = "OTEL_RESOURCE_ATTRIBUTES"
OTEL_TRACES_SAMPLER: Final = "OTEL_TRACES_SAMPLER"
OTEL_TRACES_SAMPLER_ARG: Final = "OTEL_TRACES_SAMPLER_ARG"
OTEL_SDK_DISABLED: Final = "OTEL_SDK_DISABLED"

DEFAULT_ENDPOINT: Final = "http://localhost:4318"
TRACES_PATH: Final = "/v1/traces"

Redactor = Callable[[str], str]


@dataclass(frozen=True)
class ContentMode:
    """How much document text leaves the process. The content hash is always sent.

    ``kind`` is ``"full"``, ``"truncate"`` (keep the first ``limit`` characters) or ``"hash"``
    (ids and ``document.content_hash`` only).
    """

    kind: str = "full"
    limit: int = 0

    def __str__(self) -> str:
        return f"truncate:{self.limit}" if self.kind == "truncate" else self.kind


@dataclass(frozen=True)
class Settings:
    """Everything ``configure()`` decides. Field comments name the environment variable."""

    enabled: bool = True  # RAGTRACE_ENABLED (and OTEL_SDK_DISABLED)
    traces_url: str = DEFAULT_ENDPOINT + TRACES_PATH  # RAGTRACE_ENDPOINT + /v1/traces
    service: str = "unknown_service"  # RAGTRACE_SERVICE, OTEL_SERVICE_NAME
    release: str | None = None  # RAGTRACE_RELEASE -> resource service.version
    environment: str | None = None  # RAGTRACE_ENVIRONMENT -> deployment.environment.name
    sample_rate: float = 1.0  # RAGTRACE_SAMPLE_RATE, OTEL_TRACES_SAMPLER_ARG
    content: ContentMode = field(default_factory=ContentMode)  # RAGTRACE_CONTENT
    redact: Redactor | None = None  # RAGTRACE_REDACT ("module:function")
    headers: Mapping[str, str] = field(default_factory=dict)  # RAGTRACE_HEADERS, OTEL_*_HEADERS
    compression: str = "none"  # RAGTRACE_COMPRESSION, OTEL_*_COMPRESSION
    resource_attributes: Mapping[str, str] = field(default_factory=dict)  # OTEL_RESOURCE_ATTRIBUTES
    max_queue_size: int = 8192  # RAGTRACE_MAX_QUEUE_SIZE
    max_export_batch: int = 256  # RAGTRACE_MAX_EXPORT_BATCH
    schedule_delay_s: float = 1.0  # RAGTRACE_SCHEDULE_DELAY_MS
    export_timeout_s: float = 10.0  # RAGTRACE_EXPORT_TIMEOUT_MS
    # RAGTRACE_SHUTDOWN_TIMEOUT_MS: a process must not hang at exit on an unreachable collector
    shutdown_timeout_s: float = 1.0


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = _Unset()


# --- parsing, shared by arguments and environment --------------------------------------------


def parse_content(value: object) -> ContentMode:
    """``"full"`` | ``N`` (int or digits) | ``"truncate:N"`` | ``"hash"`` -> ContentMode."""
    if isinstance(value, ContentMode):
        return value
    if isinstance(value, bool):
        raise ValueError("must be 'full', 'hash', an integer N or 'truncate:N'")
    if isinstance(value, int):
        limit = value
    elif isinstance(value, str):
        text = value.strip().lower()
        if text in ("full", "hash"):
            return ContentMode(text)
        digits = text.removeprefix("truncate:")
        if not digits.isdigit():
            raise ValueError(f"{value!r} is not 'full', 'hash', an integer N or 'truncate:N'")
        limit = int(digits)
    else:
        raise ValueError(f"{value!r} is not 'full', 'hash', an integer N or 'truncate:N'")
    if limit < 0:
        raise ValueError(f"truncation length must be >= 0, got {limit}")
    return ContentMode("truncate", limit)


def parse_sample_rate(value: object) -> float:
    if isinstance(value, bool):
        raise ValueError("must be a number in [0, 1]")
    try:
        rate = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"{value!r} is not a number in [0, 1]") from None
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"{rate} is outside [0, 1]")
    return rate


def parse_headers(value: object) -> dict[str, str]:
    """A mapping, or the OTLP text form ``k=v,k2=v2`` (values URL-decoded, like OTel)."""
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items()}
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is neither a mapping nor 'key=value,key2=value2'")
    headers: dict[str, str] = {}
    for part in value.split(","):
        if not part.strip():
            continue
        key, sep, val = part.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"header entry {part!r} is not 'key=value'")
        headers[unquote(key.strip())] = unquote(val.strip())
    return headers


def parse_compression(value: object) -> str:
    text = str(value).strip().lower()
    if text not in ("gzip", "none"):
        raise ValueError(f"{value!r} is not 'gzip' or 'none'")
    return text


def parse_bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{value!r} is not true/false")


def _positive_int(value: object) -> int:
    if isinstance(value, bool):
        raise ValueError("must be a positive integer")
    try:
        number: int = int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        raise ValueError(f"{value!r} is not a positive integer") from None
    if number <= 0:
        raise ValueError(f"{number} is not a positive integer")
    return number


def _milliseconds(value: object) -> float:
    return _positive_int(value) / 1000.0


def load_redactor(spec: str) -> Redactor:
    """Import ``module:function`` (the form ``RAGTRACE_REDACT`` takes)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"{spec!r} is not 'module:function'")
    target = getattr(importlib.import_module(module_name), attr)
    if not callable(target):
        raise ValueError(f"{spec!r} is not callable")
    redactor: Redactor = target
    return redactor


def traces_url(endpoint: str) -> str:
    """Base URL -> the traces URL, the way ``OTEL_EXPORTER_OTLP_ENDPOINT`` is interpreted."""
    base = endpoint.strip()
    if not base.startswith(("http://", "https://")):
        raise ValueError(f"{endpoint!r} is not an http(s) URL such as http://localhost:4318")
    return base.rstrip("/") + TRACES_PATH


def _full_url(value: str) -> str:
    url = value.strip()
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"{value!r} is not an http(s) URL")
    return url


def parse_resource_attributes(text: str) -> dict[str, str]:
    attrs: dict[str, str] = {}
    for part in text.split(","):
        key, sep, val = part.partition("=")
        if sep and key.strip():
            attrs[unquote(key.strip())] = unquote(val.strip())
    return attrs


# --- resolution -------------------------------------------------------------------------------


def _from_env(
    env: Mapping[str, str], names: tuple[str, ...], parse: Callable[[str], object], default: object
) -> object:
    """First set variable among ``names``, parsed; a bad value is logged and the default used."""
    for name in names:
        raw = env.get(name)
        if raw is None or raw.strip() == "":
            continue
        try:
            return parse(raw)
        except (ValueError, ImportError, AttributeError) as exc:
            _log.warning("ragtrace: ignoring %s=%r (%s); using the default %r", name, raw, exc, default)
            return default
    return default


def _arg(name: str, value: object, parse: Callable[[object], object]) -> object:
    try:
        return parse(value)
    except ValueError as exc:
        raise ValueError(f"ragtrace.configure({name}=...): {exc}") from None


def resolve(
    *,
    endpoint: object = UNSET,
    service: object = UNSET,
    release: object = UNSET,
    environment: object = UNSET,
    sample_rate: object = UNSET,
    content: object = UNSET,
    redact: object = UNSET,
    headers: object = UNSET,
    compression: object = UNSET,
    enabled: object = UNSET,
    max_queue_size: object = UNSET,
    max_export_batch: object = UNSET,
    schedule_delay_ms: object = UNSET,
    export_timeout_ms: object = UNSET,
    shutdown_timeout_ms: object = UNSET,
    env: Mapping[str, str] | None = None,
) -> Settings:
    """Resolve every option: argument > ``RAGTRACE_*`` > standard ``OTEL_*`` > default."""
    env = os.environ if env is None else env
    defaults = Settings()
    resource_attrs = parse_resource_attributes(env.get(OTEL_RESOURCE_ATTRIBUTES, ""))

    def pick(name: str, value: object, parse: Callable[[object], object], env_names: tuple[str, ...],
             default: object, env_parse: Callable[[str], object] | None = None) -> object:
        if value is not UNSET and value is not None:
            return _arg(name, value, parse)
        return _from_env(env, env_names, env_parse or parse, default)

    def text(value: object) -> str:
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"{value!r} is not a non-empty string")
        return value.strip()

    # OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is already the full traces URL; the others are base URLs.
    url: object
    if endpoint is not UNSET and endpoint is not None:
        url = _arg("endpoint", endpoint, lambda v: traces_url(text(v)))
    else:
        url = _from_env(env, (ENV_ENDPOINT,), traces_url, None)
        if url is None:
            url = _from_env(env, (OTEL_TRACES_ENDPOINT,), _full_url, None)
        if url is None:
            url = _from_env(env, (OTEL_ENDPOINT,), traces_url, defaults.traces_url)

    sampler_arg: tuple[str, ...] = ()
    if env.get(OTEL_TRACES_SAMPLER, "").strip().lower() in ("traceidratio", "parentbased_traceidratio"):
        sampler_arg = (OTEL_TRACES_SAMPLER_ARG,)

    redactor: object
    if redact is not UNSET and redact is not None:
        if isinstance(redact, str):
            redactor = _arg("redact", redact, lambda v: load_redactor(str(v)))
        elif callable(redact):
            redactor = redact
        else:
            raise ValueError("ragtrace.configure(redact=...): pass a callable str -> str or 'module:function'")
    else:
        redactor = _from_env(env, (ENV_REDACT,), load_redactor, None)

    otel_disabled = _from_env(env, (OTEL_SDK_DISABLED,), parse_bool, False)
    is_enabled = pick("enabled", enabled, parse_bool, (ENV_ENABLED,), True)

    return Settings(
        enabled=bool(is_enabled) and not otel_disabled,
        traces_url=str(url),
        service=str(pick("service", service, text, (ENV_SERVICE, OTEL_SERVICE_NAME),
                         resource_attrs.get(sc.SERVICE_NAME, defaults.service))),
        release=_optional_str(pick("release", release, text, (ENV_RELEASE,),
                                   resource_attrs.get(sc.SERVICE_VERSION))),
        environment=_optional_str(pick("environment", environment, text, (ENV_ENVIRONMENT,),
                                       resource_attrs.get(sc.DEPLOYMENT_ENVIRONMENT))),
        sample_rate=float(pick("sample_rate", sample_rate, parse_sample_rate,  # type: ignore[arg-type]
                               (ENV_SAMPLE_RATE, *sampler_arg), defaults.sample_rate)),
        content=pick("content", content, parse_content, (ENV_CONTENT,), defaults.content),  # type: ignore[arg-type]
        redact=redactor,  # type: ignore[arg-type]
        headers=pick("headers", headers, parse_headers,  # type: ignore[arg-type]
                     (ENV_HEADERS, OTEL_TRACES_HEADERS, OTEL_HEADERS), {}),
        compression=str(pick("compression", compression, parse_compression,
                             (ENV_COMPRESSION, OTEL_TRACES_COMPRESSION, OTEL_COMPRESSION), "none")),
        resource_attributes=resource_attrs,
        max_queue_size=int(pick("max_queue_size", max_queue_size, _positive_int,  # type: ignore[call-overload]
                                (ENV_MAX_QUEUE_SIZE,), defaults.max_queue_size)),
        max_export_batch=int(pick("max_export_batch", max_export_batch, _positive_int,  # type: ignore[call-overload]
                                  (ENV_MAX_EXPORT_BATCH,), defaults.max_export_batch)),
        schedule_delay_s=float(pick("schedule_delay_ms", schedule_delay_ms, _milliseconds,  # type: ignore[arg-type]
                                    (ENV_SCHEDULE_DELAY_MS,), defaults.schedule_delay_s)),
        export_timeout_s=float(pick("export_timeout_ms", export_timeout_ms, _milliseconds,  # type: ignore[arg-type]
                                    (ENV_EXPORT_TIMEOUT_MS,), defaults.export_timeout_s)),
        shutdown_timeout_s=float(pick("shutdown_timeout_ms", shutdown_timeout_ms,  # type: ignore[arg-type]
                                      _milliseconds, (ENV_SHUTDOWN_TIMEOUT_MS,), defaults.shutdown_timeout_s)),
    )


def _optional_str(value: object) -> str | None:
    return None if value is None else str(value)
