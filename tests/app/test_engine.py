"""The delivery engine on a real RocksDB store, driven by a fake clock and run_once."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter

import pytest

from app.clock import SystemClock
from app.engine import Engine, EngineSettings
from app.engine.dispatcher import backoff_ms
from app.engine.routing_sink import RoutingSink
from app.engine.sinks import CallbackSink, Outcome, Settled
from storage.protocol import LOG_SINK, NewTimer, TimerState
from storage.rocks import RocksSettings, RocksTimerStore
from tests.app.webhook_engine import webhook_engine
from tests.sinks.receiver import Receiver
from tests.waiting import wait_for

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


def test_after_the_clock_steps_back_new_timers_wait_their_delay_not_the_step(
    rocks_store, clock, caplog
):
    caplog.set_level(logging.WARNING, logger="app.engine.scanner")
    now = clock.now_ms()
    rocks_store.schedule([NewTimer("orders", "before", now + 10)], now)
    engine = Engine(rocks_store, clock)
    assert engine.run_once(clock.advance(10)) == 1
    clock.set(now - 3_600_000)  # an NTP step back of an hour
    engine.run_once(clock.now_ms())  # the scanner's next tick
    back = clock.now_ms()
    rocks_store.schedule([NewTimer("orders", "after", back + 1000)], back)
    assert engine.run_once(clock.advance(999)) == 0
    assert engine.run_once(clock.advance(1)) == 1
    assert [m.id for m in delivered_log(rocks_store)] == ["before", "after"]
    assert engine.lateness.summary().early == 0
    steps = [r for r in caplog.records if getattr(r, "event", None) == "clock_stepped_back"]
    assert [r.step_ms for r in steps] == [3_600_010]  # once, at the first scan after it


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


class _WriteFailsOnce(RocksTimerStore):
    """A real RocksDB store whose first write of the named kinds fails, like a full disk
    (fault injection)."""

    def __init__(self, settings: RocksSettings, fails: set[str]) -> None:
        super().__init__(settings)
        self.fails = fails
        self.failed = False

    def _maybe_fail(self, write: str) -> None:
        if write in self.fails and not self.failed:
            self.failed = True
            raise OSError("No space left on device")

    def commit_delivered(self, timers, delivered_ms, *, sink=LOG_SINK):
        self._maybe_fail("commit_delivered")
        return super().commit_delivered(timers, delivered_ms, sink=sink)

    def retry_later(self, timers, retry_at_ms, error, *, attempt=True):
        self._maybe_fail("retry_later")
        return super().retry_later(timers, retry_at_ms, error, attempt=attempt)


def _settled_by(sink: RoutingSink, count: int) -> list[Settled]:
    """What the sink settled, collected until ``count`` timers are answered (bounded)."""
    settled: list[Settled] = []

    def answered() -> bool:
        settled.extend(sink.collect())
        return sum(len(s.timers) for s in settled) >= count

    wait_for(answered, timeout_s=30, what=f"{count} timers settled by the webhook lane")
    return settled


@pytest.mark.parametrize("first", [Outcome.DELIVERED, Outcome.FAILED], ids=lambda o: o.name)
def test_a_store_error_settling_route_answers_strands_no_timer_in_flight(tmp_path, clock, first):
    """The first store write of a settle fails: the other answers are still recorded,
    the failed one's timers are released, and every timer is delivered in the end.

    Which answer the lane settles first depends on which POSTs return first, so the test
    puts an answer of ``first`` first. When that is a commit, its released timers are sent
    again and answered 200 again (at least once); when it is a back-off, its timers are
    sent again at attempt 1 (a 500 again), then at attempt 2.
    """

    def first_attempt_of_f_fails(body):
        return 500 if body["id"].startswith("f") and body["attempt"] == 1 else 200

    recv = Receiver("k", rule=first_attempt_of_f_fails)
    url = recv.start()
    store = _WriteFailsOnce(
        RocksSettings(str(tmp_path / "rocks")), {"commit_delivered", "retry_later"}
    )
    engine, sink = webhook_engine(store, clock, "hook", url, EngineSettings(backoff_base_ms=50))
    ids = ["ok1", "ok2", "f1", "f2"]
    try:
        now = clock.now_ms()
        store.schedule([NewTimer("hook", i, now) for i in ids], now)
        assert engine.scanner.run_once(now) == 4
        assert engine.dispatcher.run_once(now) == 4  # all four handed to the webhook lane
        settled = _settled_by(sink, 4)
        assert {s.outcome for s in settled} == {Outcome.DELIVERED, Outcome.FAILED}
        settled.sort(key=lambda s: s.outcome != first)  # stable: the rest keep their order
        again = {t.id for t in settled[0].timers}  # the answer whose write fails: released
        with pytest.raises(OSError, match="No space left"):
            engine.dispatcher.settle(settled, now)
        assert store.stats().in_flight == 0  # the failed answer's timers were released

        def all_delivered() -> bool:  # run_once also records what the lane settled
            engine.run_once(clock.advance(1000))
            return store.stats().delivered == len(ids)

        wait_for(all_delivered, timeout_s=30, what="every timer delivered")
    finally:
        engine.stop()
        recv.stop()
    try:
        assert store.stats().in_flight == 0 and store.stats().pending == 0
        _assert_posts_after_one_failed_settle(recv, ids, again)
        assert all(store.get("hook", i).state == TimerState.DELIVERED for i in ids)
    finally:
        store.close()


def _assert_posts_after_one_failed_settle(recv: Receiver, ids: list[str], again: set[str]):
    """Each timer's POSTs (ok: one 200; f: a 500, then a 200), plus one more for each
    timer of the answer whose write failed (the release sends it again)."""
    posts = Counter(a.body["id"] for a in recv.arrivals)
    oks = Counter(a.body["id"] for a in recv.ok())
    assert posts == {i: (1 if i.startswith("ok") else 2) + (i in again) for i in ids}
    assert oks == {i: 1 + (i in again and i.startswith("ok")) for i in ids}


def test_a_store_error_backing_off_a_failed_batch_releases_it(tmp_path, clock, flaky_sink):
    store = _WriteFailsOnce(RocksSettings(str(tmp_path / "rocks")), {"retry_later"})
    try:
        engine = Engine(store, clock, sink=flaky_sink(1))
        now = clock.now_ms()
        store.schedule([NewTimer("orders", "a", now)], now)
        with pytest.raises(OSError, match="No space left"):
            engine.run_once(now)  # the sink fails, then so does the back-off's write
        assert store.stats().in_flight == 0 and store.stats().pending == 1
        assert engine.run_once(now) == 1  # released: tried again, and delivered
        assert [m.id for m in delivered_log(store)] == ["a"]
        assert store.stats().in_flight == 0
    finally:
        store.close()


def test_a_store_error_settling_at_stop_still_returns_the_queued_batches(tmp_path, clock):
    """Engine.stop records what the lanes answered, then releases what is still queued:
    a failing commit in the first step must not leave the queued batches in flight."""
    recv = Receiver("k")
    url = recv.start()
    store = _WriteFailsOnce(RocksSettings(str(tmp_path / "rocks")), {"commit_delivered"})
    engine, _ = webhook_engine(
        store, clock, "hook", url, EngineSettings(scan_batch=2), stop_wait_ms=5000
    )
    try:
        now = clock.now_ms()
        store.schedule([NewTimer("hook", f"t{i}", now) for i in range(4)], now)
        assert engine.scanner.run_once(now) == 4  # two batches queued
        assert engine.dispatcher.run_once(now) == 2  # one handed to the lane, one queued
        wait_for(lambda: len(recv.ok()) == 2, timeout_s=30, what="the lane's two sends")
        assert store.stats().in_flight == 4
        with pytest.raises(OSError, match="No space left"):
            engine.stop()  # the lane's answers fail to commit
        assert store.stats().in_flight == 0 and store.stats().pending == 4
    finally:
        engine.stop()
        recv.stop()
        store.close()
