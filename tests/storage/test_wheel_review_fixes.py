"""Defects a review of the wheel store found, each reproduced as it was reported.

A crash is ``simulate_crash`` (files closed, no final checkpoint), as in
``test_wheel_recovery``; a restart is a new store on the same directory.
"""

from __future__ import annotations

import os

import pytest

from storage.errors import StoreOpenError
from storage.protocol import LOG_SINK, CancelOutcome, NewTimer, TimerState
from storage.wheel import WheelSettings, WheelTimerStore
from storage.wheel.counters import WheelCounters
from storage.wheel.timerwheel import TimerWheel

NOW = 1_700_000_000_000
P = 100


def settings(path, **changes) -> WheelSettings:
    shape = {"precision_ms": P, "slots": 1000, "roll_window_ms": 50_000, **changes}
    return WheelSettings(str(path / "w"), **shape)


def restart(store: WheelTimerStore, s: WheelSettings) -> WheelTimerStore:
    store.simulate_crash()
    return WheelTimerStore(s)


# ------------------------------------------------------------------ 1: exactly once
def test_a_delivered_timer_is_not_delivered_again_after_two_restarts(tmp_path):
    s = settings(tmp_path)
    store = WheelTimerStore(s)
    store.schedule([NewTimer("t", "A", NOW + 1000), NewTimer("t", "B", NOW + 1000)], NOW)
    handed_out = store.due(NOW + 2000, 10)
    store.commit_delivered([t for t in handed_out if t.id == "A"], NOW + 2000, sink=LOG_SINK)
    store.housekeep(NOW + 2000)  # B still in flight: the slot stays open
    store = restart(store, s)
    assert store.get("t", "A") is None
    assert [t.id for t in store.due(NOW + 2100, 10)] == ["B"]  # the open slot, walked again
    store.housekeep(NOW + 2100)
    store = restart(store, s)
    assert store.get("t", "A") is None and store.stats().pending == 1
    again = store.due(NOW + 2200, 10)
    assert [t.id for t in again] == ["B"]
    store.commit_delivered(again, NOW + 2200, sink=LOG_SINK)
    assert [(m.offset, m.id) for m in store.read_log("t", 0, 10)] == [(0, "A"), (1, "B")]
    store.due(NOW + 2300, 10)  # the slot is done: the replay position may move on
    assert store.core.replay_pos() == store.core.msglog.end
    assert store.core.replay_floor is None
    store.close()


# ------------------------------------------------------------------ 2: topics . and ..
def test_topics_dot_and_dot_dot_are_delivered_read_and_reopened(tmp_path):
    s = settings(tmp_path)
    store = WheelTimerStore(s)
    topics = [".", "..", "ok"]
    store.schedule([NewTimer(t, f"id{i}", NOW + 1000) for i, t in enumerate(topics)], NOW)
    handed_out = store.due(NOW + 2000, 10)
    assert store.commit_delivered(handed_out, NOW + 2000, sink=LOG_SINK) == [0, 0, 0]
    assert sorted(os.listdir(os.path.join(s.path, "cq"))) == ["%2E", "%2E%2E", "ok"]
    store.schedule([NewTimer(".", "later", NOW + 3000), NewTimer("..", "later", NOW + 3000)], NOW)
    for reopen in (lambda st: restart(st, s), lambda st: (st.close(), WheelTimerStore(s))[1]):
        store = reopen(store)
        assert [m.id for m in store.read_log(".", 0, 10)] == ["id0"]
        assert [m.id for m in store.read_log("..", 0, 10)] == ["id1"]
        assert [m.id for m in store.read_log("ok", 0, 10)] == ["id2"]
        assert {i.topic: i.log_end_offset for i in store.topics()} == {".": 1, "..": 1, "ok": 1}
    later = store.due(NOW + 4000, 10)
    assert sorted(t.topic for t in later) == [".", ".."]
    assert store.commit_delivered(later, NOW + 4000, sink=LOG_SINK) == [1, 1]
    assert [m.id for m in store.read_log("..", 0, 10)] == ["id1", "later"]
    store.close()


# ------------------------------------------------------------------ 3: retention
def _delivered_log(tmp_path) -> tuple[WheelTimerStore, WheelSettings, int]:
    s = settings(tmp_path, msglog_segment_bytes=2048, log_retention_ms=1000)
    store = WheelTimerStore(s)
    now = NOW
    for i in range(40):
        store.schedule([NewTimer("t", f"m{i}", now + 100, b"x" * 100)], now)
        now += 1000
        store.commit_delivered(store.due(now, 10), now, sink=LOG_SINK)
    return store, s, now


def test_retention_saves_the_new_log_start_before_it_deletes_segments(tmp_path):
    store, s, now = _delivered_log(tmp_path)
    expired = store.housekeep(now + 60_000).log_messages_expired
    assert expired > 0 and store.read_log("t", 0, 1)[0].offset == expired
    store = restart(store, s)
    assert [m.offset for m in store.read_log("t", 0, 2)] == [expired, expired + 1]
    store.close()


def test_read_log_starts_at_the_first_stored_message_when_the_log_start_was_not_saved(
    tmp_path,
):
    store, s, now = _delivered_log(tmp_path)
    store.checkpoint(now)
    msglog = store.core.msglog.file
    first_kept = msglog.segments[2].base
    for segment in msglog.segments[:2]:  # as an older version did: deleted, start not saved
        msglog.delete_segment(segment)
    store = restart(store, s)
    assert store.core.log_start == {}
    got = store.read_log("t", 0, 100)
    assert got and got[0].offset > 0 and got[-1].id == "m39"
    assert store.core.cq.entries("t", got[0].offset, 1)[0][0] >= first_kept
    assert store.core.cq.entries("t", got[0].offset - 1, 1)[0][0] < first_kept
    store.close()


# ------------------------------------------------------------------ 4: cancel twice
def test_a_batch_naming_an_in_flight_timer_twice_answers_too_late_twice(tmp_path):
    store = WheelTimerStore(settings(tmp_path))
    store.schedule([NewTimer("t", "X", NOW + 100), NewTimer("t", "Y", NOW + 60_000)], NOW)
    assert [t.id for t in store.due(NOW + 1000, 10)] == ["X"]
    results = store.cancel([("t", "X"), ("t", "Y"), ("t", "X"), ("t", "Y")])
    assert [(r.outcome, r.state) for r in results] == [
        (CancelOutcome.TOO_LATE, TimerState.IN_FLIGHT),
        (CancelOutcome.REMOVED, None),
        (CancelOutcome.TOO_LATE, TimerState.IN_FLIGHT),
        (CancelOutcome.UNKNOWN, None),  # removed by the second item, as RocksDB answers
    ]
    assert store.stats().cancelled == 1
    store.close()


# ------------------------------------------------------------------ 5: the wheel's shape
@pytest.mark.parametrize("change", [{"precision_ms": 50}, {"slots": 2000}])
def test_opening_with_another_precision_or_slots_is_refused_and_loses_nothing(tmp_path, change):
    s = settings(tmp_path)
    store = WheelTimerStore(s)
    store.schedule([NewTimer("t", "A", NOW + 5000)], NOW)
    store.close()
    with pytest.raises(StoreOpenError) as raised:
        WheelTimerStore(settings(tmp_path, **change))
    message = raised.value.message
    assert "made with precision_ms=100 and slots=1000" in message
    wanted = {"precision_ms": 100, "slots": 1000, **change}
    assert f"precision_ms={wanted['precision_ms']} and slots={wanted['slots']}" in message
    assert "TIMERSTORE_WHEEL__PRECISION_MS" in message
    store = WheelTimerStore(s)
    assert [t.id for t in store.due(NOW + 6000, 10)] == ["A"]
    store.close()


def test_a_directory_without_the_shape_record_gets_one_with_the_current_settings(tmp_path):
    s = settings(tmp_path)
    store = WheelTimerStore(s)
    store.schedule([NewTimer("t", "A", NOW + 5000)], NOW)
    store.close()
    os.unlink(os.path.join(s.path, "shape"))  # made before the record existed
    with pytest.raises(StoreOpenError, match=r"made with slots=1000; .* slots=2000"):
        WheelTimerStore(settings(tmp_path, slots=2000))  # the wheel file's size tells
    assert not os.path.exists(os.path.join(s.path, "shape"))
    store = WheelTimerStore(s)
    assert store.get("t", "A") is not None
    store.close()
    with open(os.path.join(s.path, "shape"), "rb") as f:
        assert f.read() == b'{"precision_ms":100,"slots":1000}'
    with pytest.raises(StoreOpenError, match="precision_ms=100 and slots=1000"):
        WheelTimerStore(settings(tmp_path, precision_ms=200))


# ------------------------------------------------------------------ 6: slot time 0
@pytest.mark.parametrize("deliver_ms", [1000, 50])
def test_a_clock_in_the_first_precision_sees_no_chain_in_unwritten_slots(tmp_path, deliver_ms):
    store = WheelTimerStore(settings(tmp_path))
    store.schedule([NewTimer("a", "id0", deliver_ms), NewTimer("b", "id1", deliver_ms)], 0)
    handed_out = store.due(5000, 10)
    assert sorted(t.id for t in handed_out) == ["id0", "id1"]
    assert store.due(6000, 10) == []
    store.close()


def test_a_written_slot_at_time_zero_still_reads(tmp_path):
    wheel = TimerWheel(str(tmp_path / "wheel"), slots=10, precision_ms=P, counters=WheelCounters())
    assert wheel.get_slot(0).last_pos == -1 and list(wheel.live_slots(0)) == []
    wheel.put_slot(0, 0, 0, 1, 0)  # one unit at TimerLog position 0
    assert wheel.get_slot(0)[:4] == (0, 0, 0, 1)
    assert [slot.time_ms for slot in wheel.live_slots(0)] == [0]
    wheel.close()


# ------------------------------------------------------------------ 7: long in flight
def test_a_timer_in_flight_for_longer_than_the_wheel_loses_no_acknowledged_timer(tmp_path):
    s = settings(tmp_path, slots=500, roll_window_ms=20_000)  # slots x precision: 50 s
    store = WheelTimerStore(s)
    store.schedule([NewTimer("t", "A", NOW + 1000), NewTimer("t", "C", NOW + 60_000)], NOW)
    assert [t.id for t in store.due(NOW + 2000, 10)] == ["A"]  # to a sink that never answers
    meanwhile = store.due(NOW + 81_000, 10)
    core = store.core
    scan_ahead_ms = core.scan_ms - core.read_ms
    store.schedule([NewTimer("t", "B", NOW + 170_000)], NOW + 81_000)  # acknowledged
    store = restart(store, s)
    assert {v.id for v in store.list_pending(limit=10).timers} == {"A", "B", "C"}
    assert meanwhile == []  # C was due, but A's slot was still open: the scanner waited
    assert scan_ahead_ms < s.slots * P
    delivered = []
    for _ in range(10):  # each handed-out timer holds the scanner until it is committed
        handed_out = store.due(NOW + 200_000, 10)
        store.commit_delivered(handed_out, NOW + 200_000, sink=LOG_SINK)
        delivered += [t.id for t in handed_out]
    assert delivered == ["A", "C", "B"]
    assert [m.id for m in store.read_log("t", 0, 10)] == ["A", "C", "B"]
    store.close()


def test_a_lagging_checkpoint_neither_stops_the_scanner_nor_hides_timers_from_recovery(
    tmp_path,
):
    """Units stay within 2 x slots x precision of the checkpointed read time, the part of
    the wheel recovery walks: when only the checkpoint lags (a long interval), the scanner
    takes one instead of running ahead, and delivery goes on."""
    s = settings(tmp_path, slots=50, roll_window_ms=2000, checkpoint_interval_ms=10**9)
    store = WheelTimerStore(s)  # slots x precision: 5 s; the timers span 30 s
    store.schedule([NewTimer("t", f"n{i}", NOW + 250 * i) for i in range(120)], NOW)
    now, late_ms = NOW, []
    for _ in range(300):
        now += 100
        handed_out = store.due(now, 1000)
        store.commit_delivered(handed_out, now, sink=LOG_SINK)
        late_ms += [now - t.key_ms for t in handed_out]
    assert len(late_ms) == 120 and max(late_ms) < 2 * P
    store.schedule([NewTimer("t", "last", now + 3000)], now)  # acknowledged
    store = restart(store, s)
    assert [v.id for v in store.list_pending(limit=10).timers] == ["last"]
    assert [t.id for t in store.due(now + 3100, 10)] == ["last"]
    store.close()
