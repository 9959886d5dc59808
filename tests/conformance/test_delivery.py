"""Delivery through the unchanged engine, on a fake clock: never early, once, retries."""

from __future__ import annotations

import random

import pytest

from app.engine import Engine, EngineSettings
from storage.errors import ConflictError, NotFoundError
from storage.protocol import CancelOutcome, NewTimer, TimerState
from tests.conformance.conftest import NOW, WHEEL_PRECISION_MS, ready_ms


def log_of(store, topic="orders"):
    return store.read_log(topic, 0, 1_000_000)


def test_never_early_and_each_exactly_once(store, clock):
    rng = random.Random(7)
    engine = Engine(store, clock, EngineSettings(queue_capacity=50, scan_batch=20))
    requested = {}
    for round_ in range(40):
        now = clock.now_ms()
        batch = [NewTimer("orders", f"r{round_}-{i}", now + rng.randint(-2000, 3000))
                 for i in range(25)]  # fmt: skip
        store.schedule(batch, now)
        requested.update({t.id: t.deliver_at_ms for t in batch})
        engine.run_once(clock.advance(rng.randint(1, 150)))
    engine.run_once(clock.advance(10_000))
    log = log_of(store)
    assert sorted(m.id for m in log) == sorted(requested)
    assert all(m.delivered_at_ms >= requested[m.id] for m in log)
    assert engine.lateness.summary().early == 0
    assert store.stats().pending == 0 and store.stats().in_flight == 0


def test_due_hands_out_nothing_before_time_and_everything_at_time(store):
    store.schedule([NewTimer("orders", f"x{i}", NOW + 1234) for i in range(5)], NOW)
    assert store.due(NOW + 1233, 100) == []
    assert store.due(ready_ms(store, NOW + 1234) - 1, 100) == []
    due = store.due(ready_ms(store, NOW + 1234), 100)
    assert sorted(t.id for t in due) == [f"x{i}" for i in range(5)]
    assert store.due(ready_ms(store, NOW + 1234), 100) == []  # in flight: not twice
    if store.name == "wheel":  # at most one slot late
        assert ready_ms(store, NOW + 1234) - (NOW + 1234) < WHEEL_PRECISION_MS


def test_past_due_is_delivered_once_and_keeps_its_requested_time(store, clock):
    store.schedule([NewTimer("orders", "x", NOW)], NOW)
    assert [t.id for t in store.due(ready_ms(store, NOW), 10)] == ["x"]
    [late] = store.schedule([NewTimer("orders", "old", NOW - 86_400_000)], NOW)
    assert late.deliver_at_ms >= NOW - 86_400_000
    assert store.get("orders", "old").requested_deliver_at_ms == NOW - 86_400_000
    engine = Engine(store, clock)
    engine.run_once(ready_ms(store, late.deliver_at_ms))
    engine.run_once(clock.advance(5000))
    assert [m.id for m in log_of(store)] == ["old"]
    assert log_of(store)[0].deliver_at_ms == NOW - 86_400_000


def test_queue_capacity_bounds_what_is_in_flight(store, clock):
    store.schedule([NewTimer("orders", f"t{i:04d}", NOW) for i in range(1000)], NOW)
    at = ready_ms(store, NOW)
    engine = Engine(store, clock, EngineSettings(queue_capacity=100, scan_batch=30))
    assert engine.scanner.run_once(at) == 100
    assert store.stats().in_flight == 100
    assert engine.scanner.run_once(at) == 0
    assert engine.run_once(at) == 1000 - 100 + 100
    assert sorted(m.id for m in log_of(store)) == [f"t{i:04d}" for i in range(1000)]


def test_failures_retry_with_backoff_then_deliver_once(store, clock, flaky_sink):
    store.schedule([NewTimer("orders", "a", NOW)], NOW)
    settings = EngineSettings(backoff_base_ms=1000, max_attempts=5)
    engine = Engine(store, clock, settings, sink=flaky_sink(2))
    engine.run_once(ready_ms(store, NOW))
    view = store.get("orders", "a")
    assert view.state == TimerState.PENDING and view.attempts == 1
    engine.run_once(clock.advance(500))
    assert log_of(store) == []  # the back-off is not over
    for _ in range(10):
        engine.run_once(clock.advance(1000))
    [message] = log_of(store)
    assert message.id == "a"
    assert store.stats().pending == 0


def test_dead_letter_then_replay(store, clock, flaky_sink):
    store.schedule([NewTimer("orders", "a", NOW, b"body")], NOW)
    engine = Engine(store, clock, EngineSettings(max_attempts=1), sink=flaky_sink(1))
    engine.run_once(ready_ms(store, NOW))
    page = store.dead_letters()
    assert [(v.id, v.state, v.last_error) for v in page.timers] == [
        ("a", TimerState.DEAD_LETTERED, "ConnectionError: broker down")
    ]
    assert store.stats().dead_lettered == 1 and store.stats().pending == 0
    with pytest.raises(NotFoundError):
        store.replay_dead_letter("orders", "zzz", clock.now_ms())
    replayed = store.replay_dead_letter("orders", "a", clock.now_ms())
    with pytest.raises(NotFoundError):
        store.replay_dead_letter("orders", "a", clock.now_ms())
    Engine(store, clock).run_once(ready_ms(store, replayed.deliver_at_ms))
    assert [(m.id, m.payload) for m in log_of(store)] == [("a", b"body")]


def test_replay_refuses_when_the_id_is_pending_again_and_purge_empties(store, clock):
    store.schedule([NewTimer("orders", "a", NOW), NewTimer("other", "b", NOW)], NOW)
    due = store.due(ready_ms(store, NOW), 10)
    store.dead_letter(due, NOW, "boom")
    store.schedule([NewTimer("orders", "a", NOW + 10_000)], NOW)
    with pytest.raises(ConflictError):
        store.replay_dead_letter("orders", "a", NOW)
    assert store.purge_dead_letters("other") == 1
    assert [v.id for v in store.dead_letters().timers] == ["a"]
    assert store.purge_dead_letters() == 1 and store.stats().dead_lettered == 0


def test_release_returns_in_flight_timers_to_pending(store):
    store.schedule([NewTimer("orders", f"r{i}", NOW) for i in range(3)], NOW)
    due = store.due(ready_ms(store, NOW), 10)
    assert store.stats().in_flight == 3
    store.release(due)
    assert store.stats().in_flight == 0
    again = store.due(ready_ms(store, NOW), 10)
    assert sorted(t.id for t in again) == ["r0", "r1", "r2"]


def test_topics_and_log_offsets(store, clock):
    store.schedule([NewTimer("a", "1", NOW), NewTimer("a", "2", NOW), NewTimer("b", "1", NOW)], NOW)
    store.schedule([NewTimer("b", "2", NOW + 60_000)], NOW)
    Engine(store, clock).run_once(ready_ms(store, NOW))
    assert [(t.topic, t.pending, t.log_end_offset) for t in store.topics()] == [
        ("a", 0, 2),
        ("b", 1, 1),
    ]
    assert [m.offset for m in store.read_log("a", 1, 10)] == [1]
    stats = store.stats()
    assert (stats.delivered, stats.pending) == (3, 1)


def test_a_deferral_moves_timers_later_without_counting_an_attempt(store):
    store.schedule([NewTimer("orders", "d0", NOW), NewTimer("orders", "d1", NOW)], NOW)
    due = store.due(ready_ms(store, NOW), 10)
    deferred_ms = NOW + 10 * WHEEL_PRECISION_MS
    store.retry_later(due[:1], deferred_ms, "route busy", attempt=False)
    store.retry_later(due[1:], deferred_ms, "failed", attempt=True)
    assert store.due(ready_ms(store, NOW), 10) == []  # nothing before the new time
    again = {t.id: t for t in store.due(ready_ms(store, deferred_ms), 10)}
    assert {i: t.record.attempts for i, t in again.items()} == {due[0].id: 0, due[1].id: 1}
    assert all(t.key_ms >= deferred_ms for t in again.values())


def test_replay_of_an_identity_scheduled_again_names_the_state_cancel_reports(store):
    """Both stores: in flight is in_flight (not "pending again", which the
    wheel said while cancel answered too_late/in_flight), pending is pending."""
    store.schedule([NewTimer("orders", "f", NOW), NewTimer("orders", "p", NOW)], NOW)
    store.dead_letter(store.due(ready_ms(store, NOW), 10), NOW, "the sink is down")
    later = ready_ms(store, NOW) + 10_000
    store.schedule([NewTimer("orders", "f", later), NewTimer("orders", "p", later + 60_000)], NOW)
    flying = store.due(ready_ms(store, later), 10)
    assert [t.id for t in flying] == ["f"]
    for timer_id, state in (("f", TimerState.IN_FLIGHT), ("p", TimerState.PENDING)):
        with pytest.raises(ConflictError) as caught:
            store.replay_dead_letter("orders", timer_id, later)
        assert caught.value.state == state, timer_id
    f, p = store.cancel([("orders", "f"), ("orders", "p")])  # what cancel says of each
    assert (f.outcome, f.state) == (CancelOutcome.TOO_LATE, TimerState.IN_FLIGHT)
    assert p.outcome == CancelOutcome.REMOVED
