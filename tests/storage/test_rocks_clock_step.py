"""The system clock stepped back (an NTP step, a VM restored): new timers are due after
their own delay, not after the step, and no key written meanwhile is lost.

The scan cursor and the watermark keep the time they had; before this was handled, every
new timer was clamped to them and so delivered late by the whole step.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from storage.protocol import LOG_SINK, NewTimer, TimerState
from storage.rocks import RocksSettings, RocksTimerStore
from storage.rocks.core import CLOCK_STEP_TOLERANCE_MS

NOW = 1_700_000_000_000
HOUR_MS = 3_600_000
BACK = NOW - HOUR_MS  # the clock after a step back of an hour


@pytest.fixture
def settings(tmp_path: Path) -> RocksSettings:
    return RocksSettings(str(tmp_path / "db"))


@pytest.fixture
def store(settings: RocksSettings):
    store = RocksTimerStore(settings)
    yield store
    store.close()


def deliver_all(store: RocksTimerStore, now_ms: int) -> list[str]:
    batch = store.due(now_ms, 1000)
    store.commit_delivered(batch, now_ms, sink=LOG_SINK)
    return [t.id for t in batch]


def ids_due(store: RocksTimerStore, now_ms: int) -> list[str]:
    return [t.id for t in store.due(now_ms, 1000)]


def test_a_timer_scheduled_after_the_step_is_due_after_its_own_delay(store):
    store.schedule([NewTimer("t", "before", NOW + 5), NewTimer("t", "later", NOW + 500)], NOW)
    assert deliver_all(store, NOW + 100) == ["before"]
    [result] = store.schedule([NewTimer("t", "after", BACK + 1000)], BACK)
    assert result.deliver_at_ms == BACK + 1000
    assert ids_due(store, BACK + 999) == []
    assert ids_due(store, BACK + 1000) == ["after"]
    # never early: a timer asked for before the step waits for its own time
    assert ids_due(store, NOW + 499) == []
    assert ids_due(store, NOW + 500) == ["later"]


def test_a_past_due_timer_after_the_step_is_due_at_once(store):
    assert deliver_all(store, NOW) == []
    [result] = store.schedule([NewTimer("t", "late", BACK - 5000)], BACK)
    assert result.deliver_at_ms == BACK + 1
    assert ids_due(store, BACK + 1) == ["late"]


def test_a_step_within_the_tolerance_is_followed_by_the_next_scan(store):
    """A writer takes a small step for a stale request time; the scanner takes any step."""
    step_ms = CLOCK_STEP_TOLERANCE_MS // 2
    assert deliver_all(store, NOW) == []
    store.due(NOW - step_ms, 1000)  # the scanner's tick after the step
    [result] = store.schedule([NewTimer("t", "soon", NOW - step_ms + 100)], NOW - step_ms)
    assert result.deliver_at_ms == NOW - step_ms + 100
    assert ids_due(store, NOW - step_ms + 100) == ["soon"]


def test_housekeeping_and_a_restart_keep_a_key_written_below_the_old_watermark(settings):
    store = RocksTimerStore(settings)
    store.schedule([NewTimer("t", "a", NOW + 5)], NOW)
    assert deliver_all(store, NOW + 100) == ["a"]
    assert store.housekeep(NOW + 100).watermark_ms == NOW + 101  # advanced to the cursor
    store.schedule([NewTimer("t", "b", BACK + 1000)], BACK)
    assert store.housekeep(BACK + 10).watermark_ms <= BACK + 1000
    store.close()
    store = RocksTimerStore(settings)  # scans from the persisted watermark
    try:
        assert store.stats().watermark_ms <= BACK + 1000
        assert ids_due(store, BACK + 999) == []
        assert ids_due(store, BACK + 1000) == ["b"]
    finally:
        store.close()


def test_a_key_landing_in_a_scanned_range_survives_that_range_s_commit(store):
    """A clean batch commits by one range delete of everything it scanned; once the
    cursor moved back below it, a new key may lie inside that range."""
    store.schedule([NewTimer("t", "a1", NOW + 5), NewTimer("t", "a2", NOW + 50)], NOW)
    batch = store.due(NOW + 100, 1000)
    assert [t.id for t in batch] == ["a1", "a2"]
    store.schedule([NewTimer("t", "inside", NOW + 20)], NOW - 2 * CLOCK_STEP_TOLERANCE_MS)
    store.commit_delivered(batch, NOW - 2 * CLOCK_STEP_TOLERANCE_MS, sink=LOG_SINK)
    view = store.get("t", "inside")
    assert view is not None and view.state == TimerState.PENDING
    assert view.deliver_at_ms == NOW + 20
    assert ids_due(store, NOW + 20) == ["inside"]


def test_timers_in_flight_across_the_step_are_not_handed_out_again(store):
    store.schedule([NewTimer("t", f"x{i}", NOW + i) for i in range(5)], NOW)
    batch = store.due(NOW + 10, 1000)
    assert len(batch) == 5
    store.schedule([NewTimer("t", "y", BACK + 10)], BACK)
    assert ids_due(store, BACK + 10) == ["y"]
    assert ids_due(store, NOW + 10) == []  # x0..x4 are still in flight
    store.commit_delivered(batch, BACK + 20, sink=LOG_SINK)
    assert [m.id for m in store.read_log("t", 0, 100)] == [f"x{i}" for i in range(5)]
    assert store.stats().pending == 1
