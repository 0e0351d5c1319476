"""Settings: argument > RAGTRACE_* > OTEL_* > default; bad env logged, bad arguments raise."""

from __future__ import annotations

import logging
from typing import Any

import pytest

import ragtrace
from ragtrace import semconv as sc
from ragtrace._config import ContentMode, parse_content, parse_headers, resolve


def test_defaults() -> None:
    s = resolve(env={})
    assert s.enabled and s.sample_rate == 1.0 and s.content == ContentMode("full")
    assert s.traces_url == "http://localhost:4318/v1/traces"
    assert s.service == "unknown_service" and s.release is None and s.redact is None


def test_argument_beats_environment_beats_default() -> None:
    env = {"RAGTRACE_SERVICE": "from-env", "RAGTRACE_RELEASE": "r-env", "RAGTRACE_SAMPLE_RATE": "0.25",
           "RAGTRACE_CONTENT": "truncate:40", "RAGTRACE_ENDPOINT": "http://collector:4318/",
           "RAGTRACE_HEADERS": "authorization=Bearer%20tok,x-tenant=acme", "RAGTRACE_ENVIRONMENT": "prod"}
    s = resolve(env=env)
    assert (s.service, s.release, s.sample_rate, s.environment) == ("from-env", "r-env", 0.25, "prod")
    assert s.content == ContentMode("truncate", 40)
    assert s.traces_url == "http://collector:4318/v1/traces"
    assert dict(s.headers) == {"authorization": "Bearer tok", "x-tenant": "acme"}
    s2 = resolve(service="arg", sample_rate=1, content="hash", endpoint="https://c.example/base", env=env)
    assert (s2.service, s2.sample_rate, s2.content.kind) == ("arg", 1.0, "hash")
    assert s2.traces_url == "https://c.example/base/v1/traces"


def test_standard_otel_variables_keep_working() -> None:
    env = {"OTEL_SERVICE_NAME": "otel-svc", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel:4318",
           "OTEL_EXPORTER_OTLP_HEADERS": "api-key=k", "OTEL_TRACES_SAMPLER": "traceidratio",
           "OTEL_TRACES_SAMPLER_ARG": "0.1",
           "OTEL_RESOURCE_ATTRIBUTES": "service.version=v9,deployment.environment.name=stage,team=search"}
    s = resolve(env=env)
    assert s.service == "otel-svc" and s.traces_url == "http://otel:4318/v1/traces"
    assert dict(s.headers) == {"api-key": "k"} and s.sample_rate == 0.1
    assert s.release == "v9" and s.environment == "stage" and s.resource_attributes["team"] == "search"
    # the traces-specific endpoint is a full URL, used as is; RAGTRACE_* wins over OTEL_*
    assert resolve(env={"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:1/custom"}).traces_url == "http://t:1/custom"
    assert resolve(env={**env, "RAGTRACE_SERVICE": "mine"}).service == "mine"
    assert not resolve(env={"OTEL_SDK_DISABLED": "true"}).enabled
    assert not resolve(env={"RAGTRACE_ENABLED": "false"}).enabled


def test_bad_environment_value_is_logged_and_default_used(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="ragtrace"):
        s = resolve(env={"RAGTRACE_SAMPLE_RATE": "lots", "RAGTRACE_CONTENT": "some", "RAGTRACE_MAX_QUEUE_SIZE": "-1"})
    assert s.sample_rate == 1.0 and s.content.kind == "full" and s.max_queue_size == 8192
    text = caplog.text
    assert "RAGTRACE_SAMPLE_RATE='lots'" in text and "RAGTRACE_CONTENT='some'" in text


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"sample_rate": 1.5}, r"configure\(sample_rate=...\): 1.5 is outside \[0, 1\]"),
    ({"content": "partial"}, r"configure\(content=...\).*'truncate:N'"),
    ({"endpoint": "collector:4318"}, r"configure\(endpoint=...\).*http\(s\) URL"),
    ({"headers": "novalue"}, r"configure\(headers=...\).*'key=value'"),
    ({"redact": 42}, r"configure\(redact=...\): pass a callable"),
    ({"max_queue_size": 0}, r"configure\(max_queue_size=...\)"),
])
def test_bad_arguments_raise_value_error_naming_the_argument(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ragtrace.configure(**kwargs)  # type: ignore[arg-type]
    assert ragtrace.active_settings() is None


def test_content_and_header_parsing() -> None:
    assert parse_content(200) == ContentMode("truncate", 200)
    assert parse_content("500") == ContentMode("truncate", 500)
    assert parse_content(" HASH ") == ContentMode("hash")
    assert str(parse_content("truncate:7")) == "truncate:7"
    with pytest.raises(ValueError):
        parse_content(-1)
    assert parse_headers({"a": 1}) == {"a": "1"}


def test_redact_from_environment_as_import_path() -> None:
    s = resolve(env={"RAGTRACE_REDACT": "os.path:basename"})
    assert s.redact is not None and s.redact("/a/b") == "b"


def test_disabled_configure_is_a_no_op() -> None:
    settings = ragtrace.configure(enabled=False)
    assert not settings.enabled
    assert ragtrace.active_settings() is None


def test_environment_reaches_exported_spans(monkeypatch: pytest.MonkeyPatch, configure_memory: Any) -> None:
    monkeypatch.setenv("RAGTRACE_SERVICE", "env-service")
    monkeypatch.setenv("RAGTRACE_RELEASE", "env-release")
    monkeypatch.setenv("RAGTRACE_ENVIRONMENT", "staging")
    monkeypatch.setenv("RAGTRACE_CONTENT", "hash")
    spans = configure_memory(service=None)  # no argument: the environment decides

    @ragtrace.retriever
    def search(query: str) -> list[tuple[str, str]]:
        return [("d1", "secret text")]

    search("q")
    (span,) = spans()
    resource = dict(span.resource.attributes)
    assert resource[sc.SERVICE_NAME] == "env-service"
    assert resource[sc.SERVICE_VERSION] == "env-release"
    assert resource[sc.DEPLOYMENT_ENVIRONMENT] == "staging"
    assert "secret text" not in str(dict(span.attributes or {}))
    assert (span.attributes or {})[sc.CONTENT_MODE] == "hash"
