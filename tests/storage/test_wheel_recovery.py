"""Recovery: slot chains written after the last checkpoint are rebuilt from the TimerLog;
units a crash cut off are rebuilt from the message log; a torn frame is dropped whole."""

from __future__ import annotations

import os
import shutil

from app.clock import FakeClock
from app.engine import Engine
from storage.protocol import NewTimer
from storage.wheel import WheelSettings, WheelTimerStore

NOW = 1_700_000_000_000
P = 100


def settings(tmp_path) -> WheelSettings:
    return WheelSettings(str(tmp_path / "w"), precision_ms=P, slots=600, roll_window_ms=30_000,
                         checkpoint_interval_ms=10**9)  # fmt: skip


def crash(store: WheelTimerStore) -> None:
    """Drop the store as a killed process would: no final checkpoint."""
    store.simulate_crash()


def deliver_all(store: WheelTimerStore, until_ms: int) -> list[str]:
    Engine(store, FakeClock(until_ms)).run_once(until_ms)
    return sorted(m.id for m in store.read_log("q", 0, 1000))


def test_recovery_rebuilds_a_slot_chain_written_after_the_last_checkpoint(tmp_path):
    s = settings(tmp_path)
    store = WheelTimerStore(s)
    slot_ms = NOW + 5_000
    store.schedule([NewTimer("q", f"old{i}", slot_ms + i) for i in range(3)], NOW)
    store.checkpoint(NOW)
    wheel_at_checkpoint = tmp_path / "wheel-at-checkpoint"
    shutil.copy(os.path.join(s.path, "timerwheel"), wheel_at_checkpoint)
    store.schedule([NewTimer("q", f"new{i}", slot_ms + 10 + i) for i in range(4)], NOW)
    store.cancel([("q", "old1")])
    crash(store)
    # the wheel file as a power cut would leave it: only what the checkpoint flushed
    shutil.copy(wheel_at_checkpoint, os.path.join(s.path, "timerwheel"))
    reopened = WheelTimerStore(s)
    slot = reopened.core.wheel.get_slot(slot_ms)
    assert slot.num == 3 + 4 - 1  # units re-applied: 7 normal, 1 delete
    chain, pos = [], slot.last_pos
    while pos >= 0:
        unit = reopened.core.timerlog.read(pos)
        chain.append(unit.seq)
        pos = unit.prev_pos
    assert chain == [2, 7, 6, 5, 4, 3, 2, 1]  # the delete of old1 (seq 2) is the newest
    assert reopened.stats().pending == 6
    assert deliver_all(reopened, slot_ms + P) == [
        "new0", "new1", "new2", "new3", "old0", "old2",
    ]  # fmt: skip
    reopened.close()


def test_units_a_crash_cut_off_are_enqueued_again_from_the_message_log(tmp_path):
    s = settings(tmp_path)
    store = WheelTimerStore(s)
    store.schedule([NewTimer("q", "before", NOW + 1_000)], NOW)
    store.checkpoint(NOW)
    timerlog_end = store.core.timerlog.file.end
    store.schedule([NewTimer("q", f"after{i}", NOW + 2_000) for i in range(3)], NOW)
    store.cancel([("q", "after0")])
    last = store.core.timerlog.file.segments[-1]
    crash(store)
    with open(last.path, "r+b") as f:  # the TimerLog lost everything after the checkpoint
        f.truncate(timerlog_end - last.base)
    reopened = WheelTimerStore(s)
    assert reopened.stats().pending == 3
    assert reopened.get("q", "after0") is None
    assert deliver_all(reopened, NOW + 3_000) == ["after1", "after2", "before"]
    reopened.close()


def test_a_torn_tail_frame_is_dropped_whole(tmp_path):
    s = settings(tmp_path)
    store = WheelTimerStore(s)
    store.schedule([NewTimer("q", "kept", NOW + 1_000)], NOW)
    store.checkpoint(NOW)
    store.schedule([NewTimer("q", "kept", NOW + 2_000), NewTimer("q", "torn", NOW + 2_000)], NOW)
    last = store.core.msglog.file.segments[-1]
    crash(store)
    with open(last.path, "r+b") as f:  # the reschedule's frame lost its last bytes
        f.truncate(os.path.getsize(last.path) - 3)
    reopened = WheelTimerStore(s)
    view = reopened.get("q", "kept")
    assert view is not None and view.deliver_at_ms == NOW + 1_000  # not half a reschedule
    assert reopened.get("q", "torn") is None
    assert deliver_all(reopened, NOW + 3_000) == ["kept"]
    reopened.close()


def test_the_index_is_rebuilt_from_the_wheel_on_restart(tmp_path):
    s = settings(tmp_path)
    store = WheelTimerStore(s)
    store.schedule([NewTimer("q", f"t{i}", NOW + 50 * i) for i in range(40)], NOW)
    store.schedule([NewTimer("q", "far", NOW + 100_000)], NOW)  # a ROLL unit
    store.cancel([("q", "t3")])
    store.schedule([NewTimer("q", "t4", NOW + 9_999)], NOW)
    before = store.list_pending(limit=100).timers
    store.close()
    reopened = WheelTimerStore(s)
    assert reopened.list_pending(limit=100).timers == before
    assert reopened.stats().pending == 40
    reopened.close()
