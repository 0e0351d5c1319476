"""The collector's allocator settings apply on glibc and yield to the operator's MALLOC_* variables."""

from __future__ import annotations

import platform

import pytest

from ragtrace_collector.memory import keep_freed_memory


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's (this machine's libc is not)")
def test_settings_apply_on_glibc() -> None:
    assert keep_freed_memory() is True


def test_operator_variables_win(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "131072")
    assert keep_freed_memory() is False
