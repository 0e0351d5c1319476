"""Settings precedence and parsing; the CLI's time arguments."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ragtrace_collector.settings import CollectorSettings, parse_tokens
from ragtrace_store import parse_duration, parse_time_bound


def test_arguments_beat_environment_beat_defaults() -> None:
    env = {"RAGTRACE_STORE": "/data/s", "RAGTRACE_PORT": "9999", "RAGTRACE_TOKENS": "a=t1, b=t2,c",
           "RAGTRACE_BATCH_INTERVAL": "250ms", "RAGTRACE_MAX_BODY_BYTES": "lots", "RAGTRACE_SPOOL_FSYNC": "off"}
    # a value that cannot be read is refused, naming the variable, unless an argument overrides it
    s = CollectorSettings.from_env(env, port=1234, max_body_bytes=1 << 20)
    assert (s.store, s.port, s.batch_interval, s.spool_fsync) == ("/data/s", 1234, 0.25, False)
    assert dict(s.tokens) == {"a": "t1", "b": "t2", "c": "default"}
    assert s.max_body_bytes == 1 << 20
    with pytest.raises(ValueError, match=r"RAGTRACE_MAX_BODY_BYTES='lots': not a whole number; fix or unset it"):
        CollectorSettings.from_env(env, port=1234)
    assert s.spool_path.name == "s.spool"
    assert CollectorSettings.from_env({"RAGTRACE_STORE": "http://u:p@h:8123/db"}).spool_path.name == "spool"


def test_bad_arguments_raise_with_the_field_name() -> None:
    with pytest.raises(ValueError, match="max_body_bytes"):
        CollectorSettings(max_body_bytes=0)
    with pytest.raises(ValueError, match="port"):
        CollectorSettings(port=70000)
    with pytest.raises(ValueError, match="unknown collector setting"):
        CollectorSettings.from_env({}, colour="blue")
    with pytest.raises(ValueError, match="TOKEN=TENANT"):
        parse_tokens("=x")
    with pytest.raises(ValueError, match="duration"):
        parse_duration("soon")


@pytest.mark.parametrize("name", ["batch_interval", "shutdown_timeout", "header_timeout", "body_timeout",
                                  "keep_alive_timeout"])
def test_a_duration_that_is_not_positive_is_named_with_its_value(name: str) -> None:
    # before: `--shutdown-timeout 0` was refused as "batch_interval and shutdown_timeout must be > 0 and
    # audit_every >= 0 (seconds)", without saying which of them, or what it was
    with pytest.raises(ValueError, match=rf"^{name} must be > 0 seconds, got 0\.0$"):
        CollectorSettings(**{name: 0.0})
    with pytest.raises(ValueError, match=r"^audit_every must be >= 0 seconds \(0 = no background audit\), got -1\.0$"):
        CollectorSettings(audit_every=-1.0)


@pytest.mark.parametrize("tokens", ["=t1", "a=t1,a=t2", "a=t1, =t2"])
def test_a_token_list_that_cannot_be_read_stops_the_start_not_the_auth(tokens: str,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    # ignoring it would fall back to the default: no authentication at all
    with pytest.raises(ValueError, match=r"RAGTRACE_TOKENS: .*token entry \d") as exc:
        CollectorSettings.from_env({"RAGTRACE_TOKENS": tokens})
    assert "a=" not in str(exc.value) and "'a'" not in str(exc.value)  # a token is a secret: never repeated
    with pytest.raises(ValueError, match="token"):
        parse_tokens(tokens)
    assert parse_tokens("a=t1,a=t1") == {"a": "t1"}  # the same entry twice says the same thing


def test_durations_and_times() -> None:
    assert [parse_duration(x) for x in ("15", "1.5s", "250ms", "2m", "6h", "1d")] == [
        15, 1.5, 0.25, 120, 21600, 86400]
    now = datetime.now(UTC)
    assert abs((now - parse_time_bound("6h", "since")) - timedelta(hours=6)) < timedelta(seconds=5)  # type: ignore[operator]
    assert parse_time_bound("2026-01-31T12:00", "since") == datetime(2026, 1, 31, 12, tzinfo=UTC)
    assert parse_time_bound(None, "since") is None
    with pytest.raises(ValueError, match="--until"):
        parse_time_bound("yesterday", "until")
    # `traces` and `audit` share this parser: ages with a leading '-', 'Z' and offsets normalised to UTC.
    assert abs((now - parse_time_bound("-2d", "since")) - timedelta(days=2)) < timedelta(seconds=5)  # type: ignore[operator]
    assert parse_time_bound("2026-01-31T12:00Z", "since") == datetime(2026, 1, 31, 12, tzinfo=UTC)
    assert parse_time_bound("2026-01-31T14:00+02:00", "since") == datetime(2026, 1, 31, 12, tzinfo=UTC)
