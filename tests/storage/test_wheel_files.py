"""The wheel's files: slot index wrap-around, TimerLog and message-log segment roll-over,
retention of segments nothing references."""

from __future__ import annotations

import os

from app.clock import FakeClock
from app.engine import Engine
from storage.protocol import NewTimer
from storage.wheel import WheelSettings, WheelTimerStore
from storage.wheel.counters import WheelCounters
from storage.wheel.layout import UNIT_SIZE
from storage.wheel.timerwheel import TimerLog, TimerWheel

NOW = 1_700_000_000_000


def test_slot_index_wraps_around_and_an_old_revolution_reads_as_empty(tmp_path):
    wheel = TimerWheel(
        str(tmp_path / "wheel"), slots=10, precision_ms=100, counters=WheelCounters()
    )
    span_ms = 2 * 10 * 100  # 2 x slots
    t = NOW + 250
    assert wheel.index(t) == wheel.index(t + span_ms) == (t // 100) % 20
    assert wheel.index(t + 100) == (wheel.index(t) + 1) % 20
    wheel.put_slot(t, 52, 104, 2, 0)
    slot = wheel.get_slot(t + 30)  # same slot, another millisecond in it
    assert (slot.time_ms, slot.first_pos, slot.last_pos, slot.num) == (NOW + 200, 52, 104, 2)
    assert wheel.get_slot(t + span_ms).last_pos == -1  # the next revolution: stored time differs
    wheel.put_slot(t + span_ms, 0, 0, 1, 0)  # the next revolution reuses the slot
    assert wheel.get_slot(t).last_pos == -1 and wheel.get_slot(t + span_ms).num == 1
    wheel.close()


def test_wrap_around_delivers_across_many_revolutions(tmp_path):
    settings = WheelSettings(str(tmp_path / "w"), precision_ms=10, slots=50, roll_window_ms=400)
    store = WheelTimerStore(settings)
    clock = FakeClock(NOW)
    engine = Engine(store, clock)
    delivered = 0
    for n in range(30):  # 30 x 370 ms: about 11 revolutions of a 1 s wheel
        now = clock.now_ms()
        store.schedule([NewTimer("w", f"n{n}-{i}", now + 37 * i) for i in range(10)], now)
        delivered += engine.run_once(clock.advance(370))
    delivered += engine.run_once(clock.advance(1000))
    log = store.read_log("w", 0, 1000)
    assert delivered == len(log) == 300 and len({m.id for m in log}) == 300
    assert all(m.delivered_at_ms >= m.deliver_at_ms for m in log)
    store.close()


def test_timerlog_units_never_straddle_segments(tmp_path):
    counters = WheelCounters()
    segment = 52 * 3 + 20  # three units and a 20-byte tail that gets a BLANK filler
    log = TimerLog(str(tmp_path / "tl"), segment, counters)
    positions = [log.append(-1, 1, NOW, NOW + i, i * 10, 10, 0, i) for i in range(8)]
    assert positions[:4] == [0, 52, 104, segment]  # the fourth starts the second segment
    assert all(pos % segment + UNIT_SIZE <= segment for pos in positions)
    assert len(os.listdir(tmp_path / "tl")) == 3
    assert [log.read(pos).seq for pos in positions] == list(range(8))
    assert [pos for pos, _ in log.replay(0)] == positions
    assert [unit.seq for _, unit in log.replay(positions[5])] == [5, 6, 7]
    log.file.close()


def test_segments_roll_over_and_retention_deletes_what_nothing_references(tmp_path):
    settings = WheelSettings(
        str(tmp_path / "w"), precision_ms=10, slots=1000, roll_window_ms=5000,
        msglog_segment_bytes=4096, timerlog_segment_bytes=52 * 20, log_retention_ms=1000,
    )  # fmt: skip
    store = WheelTimerStore(settings)
    clock = FakeClock(NOW)
    engine = Engine(store, clock)
    for n in range(20):
        now = clock.now_ms()
        store.schedule([NewTimer("r", f"{n}-{i}", now + 50, b"x" * 100) for i in range(10)], now)
        engine.run_once(clock.advance(100))
    msglog = store.core.msglog.file
    timerlog = store.core.timerlog.file
    assert len(msglog.segments) > 3 and len(timerlog.segments) > 3
    store.schedule([NewTimer("r", "pending", clock.now_ms() + 3000)], clock.now_ms())
    report = store.housekeep(clock.advance(2000))  # deliveries now older than retention
    assert len(timerlog.segments) <= 2 and len(msglog.segments) <= 2
    assert report.log_messages_expired > 0
    assert store.read_log("r", 0, 1000)[0].offset == report.log_messages_expired
    engine.run_once(clock.advance(2000))  # the pending one's body survived retention
    assert store.read_log("r", 0, 1000)[-1].id == "pending"
    store.close()
    reopened = WheelTimerStore(settings)
    assert reopened.stats().delivered == 201 and reopened.stats().pending == 0
    reopened.close()
