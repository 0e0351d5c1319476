"""The periodic audit's cardinality bound is configured like every setting: argument > environment >
default, and a value that is not a positive count stops the start with the setting's name."""

from __future__ import annotations

import pytest

from ragtrace_collector.settings import CollectorSettings


def test_bound_precedence_and_defaults() -> None:
    default = CollectorSettings.from_env({})
    assert (default.audit_metric_services, default.audit_metric_releases) == (20, 5)
    env = {"RAGTRACE_AUDIT_METRIC_SERVICES": "3", "RAGTRACE_AUDIT_METRIC_RELEASES": "2"}
    from_env = CollectorSettings.from_env(env)
    assert (from_env.audit_metric_services, from_env.audit_metric_releases) == (3, 2)
    assert CollectorSettings.from_env(env, audit_metric_releases=7).audit_metric_releases == 7


@pytest.mark.parametrize(("env", "overrides", "message"), [
    ({"RAGTRACE_AUDIT_METRIC_RELEASES": "many"}, {}, "RAGTRACE_AUDIT_METRIC_RELEASES"),
    ({}, {"audit_metric_services": 0}, "audit_metric_services must be > 0"),
])
def test_bad_bounds_are_refused(env: dict[str, str], overrides: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CollectorSettings.from_env(env, **overrides)
