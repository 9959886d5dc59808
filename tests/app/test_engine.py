"""The delivery engine on a real RocksDB store, driven by a fake clock and run_once."""

from __future__ import annotations

import threading
import time

import pytest

from app.clock import SystemClock
from app.engine import Engine, EngineSettings
from app.engine.dispatcher import backoff_ms
from app.engine.sinks import CallbackSink
from storage.protocol import NewTimer, TimerState

NOW = 1_700_000_000_000


def delivered_log(store, topic="orders"):
    return store.read_log(topic, 0, 1_000_000)


def test_past_due_timers_are_delivered_once(rocks_store, clock):
    now = clock.now_ms()
    rocks_store.schedule([NewTimer("orders", "old", now - 86_400_000)], now)
    engine = Engine(rocks_store, clock)
    assert engine.run_once(now) == 1
    assert engine.run_once(clock.advance(1000)) == 0
    assert [m.id for m in delivered_log(rocks_store)] == ["old"]


def test_queue_capacity_bounds_what_is_in_flight(rocks_store, clock):
    now = clock.now_ms()
    rocks_store.schedule([NewTimer("orders", f"t{i:04d}", now) for i in range(1000)], now)
    engine = Engine(rocks_store, clock, EngineSettings(queue_capacity=100, scan_batch=30))
    assert engine.scanner.run_once(now) == 100
    assert engine.queue.depth == 100
    assert rocks_store.stats().in_flight == 100
    assert engine.scanner.run_once(now) == 0  # full: it waits for the dispatcher
    assert engine.dispatcher.run_once(now) == 30
    assert engine.scanner.run_once(now) == 30
    assert engine.run_once(now) == 1000 - 30  # everything left, in order, once
    ids = [m.id for m in delivered_log(rocks_store)]
    assert ids == [f"t{i:04d}" for i in range(1000)]


def test_failing_sink_retries_with_backoff_then_dead_letters_and_replay_delivers(
    rocks_store, clock, flaky_sink
):
    now = clock.now_ms()
    rocks_store.schedule([NewTimer("orders", "a", now)], now)
    sink = flaky_sink(3)
    settings = EngineSettings(max_attempts=3, backoff_base_ms=1000, backoff_max_ms=60_000)
    engine = Engine(rocks_store, clock, settings, sink=sink)
    engine.run_once(now)  # attempt 1 fails: retry in 1 s
    assert rocks_store.get("orders", "a").attempts == 1
    engine.run_once(clock.advance(999))
    assert sink.calls == 1  # not before the back-off
    engine.run_once(clock.advance(1))  # attempt 2 fails: retry in 2 s
    assert rocks_store.get("orders", "a").attempts == 2
    engine.run_once(clock.advance(2000))  # attempt 3 fails: dead letter
    view = rocks_store.get("orders", "a")
    assert (view.state, view.attempts) == (TimerState.DEAD_LETTERED, 3)
    assert "broker down" in view.last_error
    assert delivered_log(rocks_store) == []
    rocks_store.replay_dead_letter("orders", "a", clock.now_ms())
    engine.run_once(clock.advance(1))
    assert [m.id for m in delivered_log(rocks_store)] == ["a"]
    assert rocks_store.stats().dead_lettered == 0


def test_backoff_is_exponential_and_capped():
    assert [backoff_ms(n, 100, 1000) for n in range(1, 7)] == [100, 200, 400, 800, 1000, 1000]


def test_external_sink_gets_each_batch_and_no_topic_log_is_written(rocks_store, clock):
    got = []
    now = clock.now_ms()
    rocks_store.schedule([NewTimer("orders", f"e{i}", now) for i in range(5)], now)
    engine = Engine(rocks_store, clock, sink=CallbackSink(lambda b: got.extend(t.id for t in b)))
    engine.run_once(now)
    assert got == [f"e{i}" for i in range(5)]
    assert delivered_log(rocks_store) == []
    assert rocks_store.get("orders", "e0").state == TimerState.DELIVERED


def test_stop_returns_queued_timers_to_pending(rocks_store, clock):
    now = clock.now_ms()
    rocks_store.schedule([NewTimer("orders", f"s{i}", now) for i in range(50)], now)
    engine = Engine(rocks_store, clock, EngineSettings(queue_capacity=50, scan_batch=10))
    engine.scanner.run_once(now)
    assert rocks_store.stats().in_flight == 50
    engine.stop()  # the dispatcher never ran: every queued timer goes back
    assert rocks_store.stats().in_flight == 0
    assert engine.run_once(now) == 50


@pytest.mark.slow
def test_threads_deliver_on_the_real_clock_and_stop_cleanly(rocks_store):
    clock = SystemClock()
    woke = threading.Event()
    engine = Engine(
        rocks_store, clock, EngineSettings(tick_ms=5), on_delivered=lambda t: woke.set()
    )
    now = clock.now_ms()
    rocks_store.schedule([NewTimer("orders", f"x{i}", now + 50) for i in range(100)], now)
    engine.start()
    try:
        deadline = time.monotonic() + 10
        while rocks_store.stats().delivered < 100 and time.monotonic() < deadline:
            woke.wait(0.05)
        assert engine.running
    finally:
        engine.stop()
    log = delivered_log(rocks_store)
    assert len(log) == 100
    assert all(m.delivered_at_ms >= now + 50 for m in log)
    assert not engine.running
