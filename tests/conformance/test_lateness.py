"""Lateness counts from the time an attempt fell due, on both stores.

A first attempt is late from its requested time; a retry from the end of its back-off;
a replayed dead letter from its replay; a deferral (a busy route, no attempt) keeps
counting from the first due time. Before, a retry counted its back-off as lateness, and
a dead letter replayed a day later was a day late: one replay set off the p99 alert of
docs/operations.md.
"""

from __future__ import annotations

from app.engine import Engine, EngineSettings
from storage.protocol import NewTimer
from tests.conformance.conftest import NOW, WHEEL_PRECISION_MS, ready_ms

DAY_MS = 86_400_000


def _deliver_attempt(engine: Engine, store, clock, timer_id: str) -> None:
    """Run the engine once at the earliest time the timer's current key is handed out."""
    clock.set(ready_ms(store, store.get("orders", timer_id).deliver_at_ms))
    engine.run_once(clock.now_ms())


def test_a_retry_is_late_from_the_end_of_its_back_off(store, clock, flaky_sink):
    store.schedule([NewTimer("orders", "a", NOW)], NOW)
    settings = EngineSettings(backoff_base_ms=60_000, max_attempts=5)
    sink = flaky_sink(2)
    engine = Engine(store, clock, settings, sink=sink)
    for _ in range(3):  # fails, due a minute later; fails, due 2 minutes later; delivered
        _deliver_attempt(engine, store, clock, "a")
    assert sink.calls == 3 and store.stats().delivered == 1
    [message] = store.read_log("orders", 0, 10)
    assert message.delivered_at_ms >= NOW + 180_000  # after both back-offs
    summary = engine.lateness.summary()
    assert (summary.window, summary.early) == (1, 0)
    assert summary.max_ms is not None and summary.max_ms < WHEEL_PRECISION_MS  # not 3 min


def test_a_replayed_dead_letter_is_late_from_its_replay(store, clock, flaky_sink):
    store.schedule([NewTimer("orders", "a", NOW)], NOW)
    Engine(store, clock, EngineSettings(max_attempts=1), sink=flaky_sink(1)).run_once(
        ready_ms(store, NOW)
    )
    assert store.stats().dead_lettered == 1
    replay_ms = NOW + DAY_MS
    clock.set(replay_ms)
    replayed = store.replay_dead_letter("orders", "a", replay_ms)
    engine = Engine(store, clock)
    engine.run_once(ready_ms(store, replayed.deliver_at_ms))
    assert store.stats().delivered == 1
    summary = engine.lateness.summary()
    assert summary.max_ms is not None and summary.max_ms < WHEEL_PRECISION_MS  # not a day
    [message] = store.read_log("orders", 0, 10)
    assert message.deliver_at_ms == NOW  # the requested time is kept
    assert message.delivered_at_ms >= replay_ms


def test_a_deferral_stays_late_from_the_first_due_time(store, clock):
    """A busy route defers without an attempt: that wait is the service's lateness."""
    store.schedule([NewTimer("orders", "d", NOW)], NOW)
    due = store.due(ready_ms(store, NOW), 10)
    deferred_ms = NOW + 30_000
    store.retry_later(due, deferred_ms, "route busy", attempt=False)
    engine = Engine(store, clock)
    engine.run_once(ready_ms(store, deferred_ms))
    summary = engine.lateness.summary()
    assert summary.max_ms is not None and summary.max_ms >= 30_000
