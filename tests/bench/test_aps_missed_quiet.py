"""APScheduler's missed jobs are counted, not logged one line each (a quick bench printed
362 "was missed by" warnings between its progress bars)."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from bench.measure import now_ms
from bench.systems.aps import ApsSystem
from bench.systems.base import BenchTimer


def test_missed_jobs_are_counted_without_a_warning_each(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    system = ApsSystem("aps-test", str(tmp_path), sqlite=False, grace_default=True)
    try:
        now = now_ms()
        # due 10 s ago: past the default misfire grace of 1 s, so every one is missed
        system.schedule([BenchTimer(f"t{i}", now - 10_000, b"") for i in range(20)], now)
        with caplog.at_level(logging.WARNING, logger="apscheduler"):
            system.start()
            deadline = time.monotonic() + 30
            while system.settled() < 20 and time.monotonic() < deadline:
                time.sleep(0.01)
    finally:
        system.close()
    assert system.counters() == {"missed": 20, "errors": 0, "ran": 0}
    assert not [r for r in caplog.records if "was missed by" in r.getMessage()]
