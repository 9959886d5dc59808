"""Rolling timers beyond the window, and DELETE units applied before normal ones."""

from __future__ import annotations

from app.clock import FakeClock
from app.engine import Engine
from storage.protocol import CancelOutcome, NewTimer
from storage.wheel import WheelSettings, WheelTimerStore
from storage.wheel.dequeue import SlotWalk
from storage.wheel.layout import MAGIC_ROLL

NOW = 1_700_000_000_000
P = 100


def make(tmp_path) -> WheelTimerStore:
    settings = WheelSettings(str(tmp_path / "w"), precision_ms=P, slots=600, roll_window_ms=30_000)
    return WheelTimerStore(settings)


def units_of_slot(store, slot_ms):
    c = store.core
    out, pos = [], c.wheel.get_slot(slot_ms).last_pos
    while pos >= 0:
        unit = c.timerlog.read(pos)
        out.append(unit)
        pos = unit.prev_pos
    return out


def test_a_timer_beyond_the_roll_window_rolls_and_is_delivered_on_time(tmp_path):
    store = make(tmp_path)
    clock = FakeClock(NOW)
    deliver_ms = NOW + 100_000  # the window is 30 s: this needs several rolls
    store.schedule([NewTimer("r", "far", deliver_ms, b"body")], NOW)
    [unit] = units_of_slot(store, NOW + 30_000)  # written at the window edge
    assert unit.magic & MAGIC_ROLL and unit.target_ms == NOW + 30_000
    engine = Engine(store, clock)
    while clock.now_ms() < deliver_ms - P:
        engine.run_once(clock.advance(P))
        assert store.read_log("r", 0, 10) == [], "delivered early"
    assert store.counters()["rolls"] >= 2
    assert store.get("r", "far").payload == b"body"  # the index follows the body copy
    engine.run_once(clock.advance(2 * P))
    [message] = store.read_log("r", 0, 10)
    assert message.id == "far" and message.payload == b"body"
    assert deliver_ms <= message.delivered_at_ms < deliver_ms + 2 * P
    store.close()


def test_a_roll_just_past_the_edge_goes_half_way_as_rocketmq_does(tmp_path):
    store = make(tmp_path)
    store.schedule([NewTimer("r", "near", NOW + 31_000)], NOW)  # edge + less than window/3
    [unit] = units_of_slot(store, NOW + 15_000)
    assert unit.magic & MAGIC_ROLL
    store.close()


def test_a_cancelled_far_timer_rolls_its_delete_and_is_never_delivered(tmp_path):
    store = make(tmp_path)
    clock = FakeClock(NOW)
    store.schedule([NewTimer("r", "far", NOW + 100_000)], NOW)
    assert store.cancel([("r", "far")])[0].outcome == CancelOutcome.REMOVED
    Engine(store, clock).run_once(NOW + 200_000)
    assert store.read_log("r", 0, 10) == []
    assert store.counters()["delete_rolls"] >= 1
    store.close()


def test_delete_units_are_applied_before_normal_ones_in_the_same_slot(tmp_path):
    store = make(tmp_path)
    store.schedule([NewTimer("d", f"x{i}", NOW + 5_000) for i in range(4)], NOW)
    store.cancel([("d", "x1"), ("d", "x3")])
    store.schedule([NewTimer("d", "x4", NOW + 5_050)], NOW)  # appended after the deletes
    kinds = [("D" if u.is_delete else "N", u.seq) for u in units_of_slot(store, NOW + 5_000)]
    # newest first: the deletes sit *after* the units they delete in the chain
    assert kinds == [("N", 5), ("D", 4), ("D", 2), ("N", 4), ("N", 3), ("N", 2), ("N", 1)]
    walk = SlotWalk(NOW + 5_000)
    assert walk.extend(store.core.timerlog, store.core.wheel)
    assert walk.deletes == {2, 4}  # pass 1 knows every delete before pass 2 hands out
    due = store.due(NOW + 5_000 + P - 1, 100)
    assert sorted(t.id for t in due) == ["x0", "x2", "x4"]
    assert store.counters()["deletes_applied"] == 2  # dropped by the units, not the index
    store.close()


def test_a_reschedule_writes_a_delete_for_the_old_time_and_a_unit_for_the_new(tmp_path):
    store = make(tmp_path)
    store.schedule([NewTimer("d", "a", NOW + 1_000)], NOW)
    store.schedule([NewTimer("d", "a", NOW + 2_000)], NOW)
    assert [u.is_delete for u in units_of_slot(store, NOW + 1_000)] == [True, False]
    assert [u.is_delete for u in units_of_slot(store, NOW + 2_000)] == [False]
    assert store.due(NOW + 1_000 + P - 1, 10) == []
    assert [t.id for t in store.due(NOW + 2_000 + P - 1, 10)] == ["a"]
    store.close()
