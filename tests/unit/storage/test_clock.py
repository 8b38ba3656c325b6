"""The system clock's fault-harness hook: ``SAMSA_CLOCK_OFFSET_MS`` skews the wall clock only."""

from __future__ import annotations

import time

import pytest

from storage.clock import SystemClock


def test_the_offset_skews_the_wall_clock_and_not_the_monotonic_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAMSA_CLOCK_OFFSET_MS", "-3600000")
    skewed = SystemClock()
    monkeypatch.delenv("SAMSA_CLOCK_OFFSET_MS")
    true = SystemClock()
    difference = true.milliseconds() - skewed.milliseconds()
    assert 3_600_000 <= difference < 3_600_000 + 1_000
    assert abs(skewed.monotonic_ms() - time.monotonic_ns() // 1_000_000) < 1_000
