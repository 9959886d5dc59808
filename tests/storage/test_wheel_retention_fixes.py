"""Defects the stateful test (``test_wheel_stateful``) found, each reduced to explicit calls.

1. A roll copy due in the very slot it was rolled from (the read time far behind the
   clock) landed in that slot after its walk had ended: the timer was never handed out.
2. Recovery did not count units written after the checkpoint whose slot the
   memory-mapped wheel already held: retention then deleted a TimerLog or message-log
   segment a pending timer still needed (``KeyError: ... position ... is not stored`` in
   ``due``, and on the next start).

A crash is ``simulate_crash`` (files closed, no final checkpoint), as in
``test_wheel_recovery``; a restart is a new store on the same directory.
"""

from __future__ import annotations

from storage.protocol import LOG_SINK, NewTimer
from storage.wheel import WheelSettings, WheelTimerStore

NOW = 1_700_000_000_000  # a whole slot
P = 100


def restart(store: WheelTimerStore, s: WheelSettings) -> WheelTimerStore:
    store.simulate_crash()
    return WheelTimerStore(s)


def deliver(store: WheelTimerStore, now_ms: int) -> list[str]:
    """Every timer due at ``now_ms``, committed as it comes (bounded)."""
    ids: list[str] = []
    for _ in range(10):
        batch = store.due(now_ms, 100)
        if not batch:
            break
        store.commit_delivered(batch, now_ms, sink=LOG_SINK)
        ids += [t.id for t in batch]
    return sorted(ids)


# ------------------------------------------------------------------ 1: roll into its own slot
def test_a_roll_copy_due_in_the_slot_it_was_rolled_from_is_handed_out(tmp_path):
    """The wheel is 50 slots of 10 ms, the roll window 100 ms. A timer at +609 ms gets a
    ROLL unit at +100. Read with the clock 10 s later, the copy made there goes to the
    wheel's edge, +600 (the read time + 500 ms; +609 is not before it, so it rolls
    again); the copy made at +600 is due at +609, in the slot being walked."""
    s = WheelSettings(str(tmp_path / "w"), precision_ms=10, slots=50, roll_window_ms=100)
    store = WheelTimerStore(s)
    store.schedule([NewTimer("t", "late", NOW + 609)], NOW)
    assert deliver(store, NOW + 10_000) == ["late"]
    assert store.counters()["rolls"] == 2
    assert store.stats().pending == 0
    store.close()


# ------------------------------------------------------------------ 2: retention after a crash
def _crash_after_a_unit_past_the_checkpoint(s: WheelSettings) -> WheelTimerStore:
    """Timer "early" (+1 s) is checkpointed; "later" (+5 s) is written after the checkpoint into
    the same segments, then the process dies. The wheel file (memory-mapped) holds the
    slot of "later", so recovery finds its chain already in place."""
    store = WheelTimerStore(s)
    store.schedule([NewTimer("t", "early", NOW + 1_000)], NOW)
    store.checkpoint(NOW)
    store.schedule([NewTimer("t", "later", NOW + 5_000)], NOW)
    store = restart(store, s)
    assert store.core.wheel.get_slot(NOW + 5_000).last_pos >= 0
    return store


def test_retention_keeps_a_timerlog_segment_holding_a_unit_written_after_the_checkpoint(
    tmp_path,
):
    s = WheelSettings(str(tmp_path / "w"), precision_ms=P, slots=1000, roll_window_ms=50_000,
                      timerlog_segment_bytes=52 * 4, checkpoint_interval_ms=10**9)  # fmt: skip
    store = _crash_after_a_unit_past_the_checkpoint(s)
    # three more units fill the first TimerLog segment and open a second one
    store.schedule([NewTimer("t", f"fill{i}", NOW + 1_500) for i in range(3)], NOW)
    assert len(store.core.timerlog.file.segments) == 2
    assert deliver(store, NOW + 2_000) == ["early", "fill0", "fill1", "fill2"]
    store.housekeep(NOW + 2_000)  # the read time is past every unit but the one of "later"
    # the unit of "later" keeps segment 0: recovery walks its chain again (it failed with
    # KeyError: timerlog position 52 is not stored, the store could not be opened)
    store = restart(store, s)
    assert store.get("t", "later") is not None
    assert deliver(store, NOW + 6_000) == ["later"]
    store.close()


def test_retention_keeps_a_message_log_segment_holding_a_body_written_after_the_checkpoint(
    tmp_path,
):
    s = WheelSettings(str(tmp_path / "w"), precision_ms=P, slots=1000, roll_window_ms=50_000,
                      msglog_segment_bytes=200, log_retention_ms=0,
                      checkpoint_interval_ms=10**9)  # fmt: skip
    store = _crash_after_a_unit_past_the_checkpoint(s)
    body_pos = store.core.index[("t", "later")].body_pos
    assert store.core.msglog.file.segment_of(body_pos).base == 0
    assert deliver(store, NOW + 2_000) == ["early"]
    for i in range(6):  # later frames go to later segments
        store.schedule([NewTimer("t", f"filler{i}", NOW + 9_000)], NOW + 2_000)
    assert len(store.core.msglog.file.segments) >= 3
    # the read time is past every unit but the one of "later"; the delivery of "early"
    # in segment 0 is older than the topic log keeps (zero)
    store.housekeep(NOW + 3_000)
    # the body of "later" keeps segment 0 (due failed: msglog position 69 is not stored)
    assert deliver(store, NOW + 6_000) == ["later"]
    store.close()
