"""kill -9 loses no acknowledged schedule or cancel, and the topic log stays exactly-once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.clock import SystemClock
from app.engine import Engine
from storage.protocol import TimerState
from storage.rocks import RocksSettings, RocksTimerStore

CHILD = Path(__file__).with_name("crash_child.py")


def run_and_kill(path: str, acks_wanted: int) -> tuple[set[str], set[str], set[str]]:
    """Acknowledged schedules, acknowledged cancels, and cancels only attempted."""
    scheduled: set[str] = set()
    cancelled: set[str] = set()
    attempted: set[str] = set()
    child = subprocess.Popen(
        [sys.executable, str(CHILD), path], stdout=subprocess.PIPE, text=True, bufsize=1
    )

    def take(line: str) -> None:
        kind, _, rest = line.strip().partition(" ")
        if kind == "S":
            scheduled.update(rest.split(","))
        elif kind == "C":
            cancelled.add(rest)
        elif kind == "X":
            attempted.update(rest.split(","))

    assert child.stdout is not None
    try:
        deadline = time.monotonic() + 60
        while len(scheduled) < acks_wanted and time.monotonic() < deadline:
            line = child.stdout.readline()
            if not line:
                break
            take(line)
        os.kill(child.pid, signal.SIGKILL)
        for line in child.stdout:  # what it printed before dying is acknowledged too
            if line.endswith("\n"):  # a torn last line acknowledges nothing
                take(line)
    finally:
        child.wait(10)
    assert child.returncode == -signal.SIGKILL
    return scheduled, cancelled, attempted - cancelled


@pytest.mark.slow
@pytest.mark.parametrize("round_", range(3))
def test_sigkill_loses_no_acknowledged_write_and_redelivers_nothing(tmp_path, round_):
    path = str(tmp_path / "rocks")
    scheduled, cancelled, undecided = run_and_kill(path, acks_wanted=3000 + 1000 * round_)
    assert len(scheduled) >= 3000 and cancelled
    store = RocksTimerStore(RocksSettings(path))
    try:
        for timer_id in sorted(cancelled):
            assert store.get("crash", timer_id) is None, timer_id
        states = {}
        for timer_id in scheduled - cancelled - undecided:
            view = store.get("crash", timer_id)
            assert view is not None, f"acknowledged timer {timer_id} was lost"
            states[timer_id] = view.state
        assert set(states.values()) <= {TimerState.PENDING, TimerState.DELIVERED}
        far_future = SystemClock().now_ms() + 10 * 60_000
        Engine(store, SystemClock()).run_once(far_future)
        log_ids = [m.id for m in store.read_log("crash", 0, 10_000_000)]
        assert len(log_ids) == len(set(log_ids)), "a timer was delivered twice"
        assert scheduled - cancelled - undecided <= set(log_ids)
        assert not cancelled & set(log_ids)
        assert store.stats().pending == 0
    finally:
        store.close()
