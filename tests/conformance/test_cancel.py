"""Cancel answers: removed, unknown, too late. Where the wheel must differ it is asserted."""

from __future__ import annotations

from app.engine import Engine
from storage.protocol import LOG_SINK, CancelOutcome, NewTimer, TimerState
from tests.conformance.conftest import NOW, ready_ms


def test_cancel_pending_removes_it_for_good(store, clock):
    store.schedule([NewTimer("orders", "a", NOW + 100), NewTimer("orders", "b", NOW + 100)], NOW)
    [removed] = store.cancel([("orders", "a")])
    assert removed.outcome == CancelOutcome.REMOVED
    assert store.get("orders", "a") is None
    assert store.stats().cancelled == 1 and store.stats().pending == 1
    Engine(store, clock).run_once(ready_ms(store, NOW + 100) + 10_000)
    assert [m.id for m in store.read_log("orders", 0, 10)] == ["b"]


def test_cancel_of_a_never_scheduled_id_is_unknown(store):
    """The wheel answers unknown truthfully because of its pending index; RocketMQ would
    write a delete unit that matches nothing and report success."""
    [result] = store.cancel([("orders", "never")])
    assert result.outcome == CancelOutcome.UNKNOWN
    assert store.stats().cancelled == 0


def test_cancel_twice_in_one_call_is_removed_then_unknown(store):
    store.schedule([NewTimer("orders", "a", NOW + 100)], NOW)
    results = store.cancel([("orders", "a"), ("orders", "a")])
    assert [r.outcome for r in results] == [CancelOutcome.REMOVED, CancelOutcome.UNKNOWN]


def test_cancel_in_flight_is_too_late(store):
    store.schedule([NewTimer("orders", "a", NOW)], NOW)
    [due] = store.due(ready_ms(store, NOW), 10)
    [result] = store.cancel([("orders", "a")])
    assert (result.outcome, result.state) == (CancelOutcome.TOO_LATE, TimerState.IN_FLIGHT)
    store.commit_delivered([due], ready_ms(store, NOW), sink=LOG_SINK)
    assert [m.id for m in store.read_log("orders", 0, 10)] == ["a"]


def test_cancel_after_delivery(store, clock):
    """RocksDB keeps delivery records for done_retention_ms and answers too_late/delivered.
    The wheel keeps none (RocketMQ has none either): it answers unknown, which the
    protocol defines as 'never scheduled, or expired from done' (retention zero)."""
    store.schedule([NewTimer("orders", "a", NOW)], NOW)
    Engine(store, clock).run_once(ready_ms(store, NOW))
    [result] = store.cancel([("orders", "a")])
    if store.name == "rocks":
        assert (result.outcome, result.state) == (CancelOutcome.TOO_LATE, TimerState.DELIVERED)
    else:
        assert (result.outcome, result.state) == (CancelOutcome.UNKNOWN, None)


def test_cancel_of_a_released_timer_removes_it(store):
    store.schedule([NewTimer("orders", "a", NOW)], NOW)
    due = store.due(ready_ms(store, NOW), 10)
    store.release(due)
    assert store.cancel([("orders", "a")])[0].outcome == CancelOutcome.REMOVED
    assert store.due(ready_ms(store, NOW) + 1000, 10) == []
    assert store.stats().in_flight == 0 and store.stats().pending == 0


def test_cancel_of_a_dead_letter_removes_it(store):
    store.schedule([NewTimer("orders", "a", NOW)], NOW)
    due = store.due(ready_ms(store, NOW), 10)
    store.dead_letter(due, NOW + 50, "boom")
    assert store.get("orders", "a").state == TimerState.DEAD_LETTERED
    assert store.cancel([("orders", "a")])[0].outcome == CancelOutcome.REMOVED
    assert store.get("orders", "a") is None
    assert store.stats().dead_lettered == 0


def test_cancel_of_an_identity_scheduled_again_after_its_dead_letter_removes_both(store):
    """A dead-lettered identity may be scheduled again (schedule does not look at the dead
    letters). Cancelling it must leave nothing: the contract run found a DELETE answered
    204 and the GET after it answering 200 dead_lettered."""
    store.schedule([NewTimer("orders", "a", NOW)], NOW)
    store.dead_letter(store.due(ready_ms(store, NOW), 10), NOW, "the sink is down")
    store.schedule([NewTimer("orders", "a", NOW + 60_000)], NOW)
    assert store.get("orders", "a").state == TimerState.PENDING
    assert store.stats().dead_lettered == 1
    [result] = store.cancel([("orders", "a")])
    assert result.outcome == CancelOutcome.REMOVED
    assert store.get("orders", "a") is None
    assert store.stats().dead_lettered == 0 and store.stats().pending == 0
    assert store.dead_letters().timers == []
