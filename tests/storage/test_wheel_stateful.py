"""The RIP-43 wheel store against a plain in-memory model, step by step (hypothesis.stateful).

Schedule, reschedule, cancel, due, commit (whole batches and parts of them), retry,
release, checkpoints, housekeeping, the clock stepping back and a crash interleave on real
files in a temporary directory; after every step the store's view of every identity, its
counters and its topic log must equal the model's. The wheel is shaped small (10 ms
slots, a 500 ms wheel, a 100 ms roll window, tiny segments, two roll copies per frame),
so timers roll, chains span segments and the read time laps the wheel many times.

The model holds the wheel's own answers where they differ from the RocksDB store's
(``storage.wheel.store``'s docstring): a delivered identity is forgotten (cancel says
``unknown``, a schedule makes a new timer), and a timer is up to one slot late. The
rules both stores share are in ``tests.storage.store_machine``.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule

from storage.errors import ConflictError
from storage.protocol import DueTimer, NewTimer, TimerState
from storage.wheel import WheelSettings, WheelTimerStore
from tests.storage.store_machine import IDS, TOPICS, Model, StoreMachine

PRECISION_MS = 10
DRAIN_CALLS = 200  # due calls a drain may take: the read time walks slot by slot


class WheelVsModel(StoreMachine):
    def open_store(self) -> WheelTimerStore:
        return WheelTimerStore(
            WheelSettings(
                self.dir + "/w",
                precision_ms=PRECISION_MS,
                slots=50,
                roll_window_ms=100,
                msglog_segment_bytes=4096,
                timerlog_segment_bytes=52 * 8,
                checkpoint_interval_ms=10**9,  # checkpoints only when the rule says so
                roll_batch=2,
            )
        )

    def delivered(self, timer: DueTimer, sink: str) -> None:
        del self.model[(timer.topic, timer.id)]  # the wheel keeps no record by id

    @rule(topic=st.sampled_from(TOPICS), tid=st.sampled_from(IDS),
          delay_ms=st.integers(-50, 1500), payload=st.binary(max_size=8))  # fmt: skip
    def schedule(self, topic: str, tid: str, delay_ms: int, payload: bytes) -> None:
        known = self.model.get((topic, tid))
        timer = NewTimer(topic, tid, self.now_ms + delay_ms, payload)
        if known is not None and known.state == TimerState.IN_FLIGHT:
            with pytest.raises(ConflictError) as caught:
                self.store.schedule([timer], self.now_ms)
            assert caught.value.state == TimerState.IN_FLIGHT
            return
        [result] = self.store.schedule([timer], self.now_ms)
        assert result.replaced == (known is not None)
        assert result.deliver_at_ms >= self.now_ms + delay_ms  # never earlier than asked
        self.model[(topic, tid)] = Model(TimerState.PENDING, result.deliver_at_ms, payload)

    @rule(advance_ms=st.integers(0, 80), limit=st.integers(1, 4))
    def due(self, advance_ms: int, limit: int) -> None:
        self.now_ms += advance_ms
        self.latest_ms = max(self.latest_ms, self.now_ms)
        self._take(self.store.due(self.now_ms, limit))

    def _take(self, batch: list[DueTimer]) -> None:
        for t in batch:
            known = self.model[(t.topic, t.id)]
            assert known.state == TimerState.PENDING, (t.topic, t.id)
            # never early: a timer released and handed out again after the clock stepped
            # back was due at an earlier, higher reading
            assert t.record.requested_deliver_at_ms <= known.deliver_ms <= self.latest_ms
            assert t.record.payload == known.payload
            known.state = TimerState.IN_FLIGHT
        if batch:
            self.batches.append(batch)

    @precondition(lambda self: self.batches)
    @rule(back_ms=st.integers(-5, 300))
    def retry(self, back_ms: int) -> None:
        batch = self.batches.pop()
        self.store.retry_later(batch, self.now_ms + back_ms, "boom")
        for t in batch:
            view = self.store.get(t.topic, t.id)
            assert view is not None and view.deliver_at_ms >= self.now_ms + back_ms
            self.model[(t.topic, t.id)] = Model(
                TimerState.PENDING, view.deliver_at_ms, t.record.payload, t.record.attempts + 1
            )

    @precondition(lambda self: not self.batches)
    @rule()
    def drain(self) -> None:
        """Far in the future every pending timer is due: none may be lost or duplicated.

        Each batch is committed as it comes, as the engine would: a slot handed out a lap
        ago holds the read time until its timers finish (RocketMQ's rule), so only with
        nothing left in flight does the read time reach every slot."""
        self.now_ms = self.latest_ms = self.latest_ms + 10_000
        pending = {k for k, m in self.model.items() if m.state == TimerState.PENDING}
        taken: list[tuple[str, str]] = []
        for _ in range(DRAIN_CALLS):
            batch = self.store.due(self.now_ms, 1000)
            if not batch and sorted(taken) == sorted(pending):
                break
            self._take(batch)
            if batch:
                self.commit(whole=True, to_log=True)
            taken += [(t.topic, t.id) for t in batch]
        assert sorted(taken) == sorted(pending)

    @rule(back_ms=st.integers(1, 3000))
    def step_clock_back(self, back_ms: int) -> None:
        """RocketMQ's read time never moves back: timers asked for meanwhile wait for it."""
        self.now_ms -= back_ms

    @rule()
    def checkpoint(self) -> None:
        self.store.checkpoint(self.now_ms)

    @invariant()
    def store_equals_model(self) -> None:
        for topic in TOPICS:
            for tid in IDS:
                view = self.store.get(topic, tid)
                known = self.model.get((topic, tid))
                if known is None:
                    assert view is None, (topic, tid, view)
                    continue
                assert view is not None, (topic, tid, known)
                assert (view.state, view.attempts, view.payload, view.deliver_at_ms) == (
                    known.state, known.attempts, known.payload, known.deliver_ms
                ), (topic, tid)  # fmt: skip
        stats = self.store.stats()
        assert stats.pending == len(self.model)
        assert stats.delivered_by_sink == self.by_sink
        for topic in TOPICS:
            assert self.logged_ids(topic) == self.log.get(topic, [])


TestWheelVsModel = WheelVsModel.TestCase
TestWheelVsModel.settings = settings(
    max_examples=40,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
