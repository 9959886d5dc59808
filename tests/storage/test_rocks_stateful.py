"""The RocksDB store against a plain in-memory model, step by step (hypothesis.stateful).

Schedule, reschedule, cancel, due, commit (whole batches and parts of them), retry,
release, housekeeping, the clock stepping back and restart interleave on a real RocksDB
in a temporary directory; after every step the store's view of every identity, its
counters and its topic log must equal the model's. Whole-batch commits take the
delete_range path, partial ones the point deletes, and releases and retries rewind the
scanner, so the range bookkeeping is exercised too. The rules both stores share are in
``tests.storage.store_machine``.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule

from storage.errors import ConflictError
from storage.protocol import DueTimer, NewTimer, TimerState
from storage.rocks import RocksSettings, RocksTimerStore
from storage.rocks.core import CLOCK_STEP_TOLERANCE_MS
from tests.storage.store_machine import IDS, TOPICS, Model, StoreMachine


class RocksVsModel(StoreMachine):
    def __init__(self) -> None:
        self.scanned_ms: int | None = None  # the time of the last due scan
        super().__init__()

    def open_store(self) -> RocksTimerStore:
        return RocksTimerStore(RocksSettings(self.dir + "/db"))

    def delivered(self, timer: DueTimer, sink: str) -> None:
        known = self.model[(timer.topic, timer.id)]
        known.state, known.sink = TimerState.DELIVERED, sink
        known.attempts += 1

    @rule(topic=st.sampled_from(TOPICS), tid=st.sampled_from(IDS),
          delay_ms=st.integers(-50, 50), payload=st.binary(max_size=8))  # fmt: skip
    def schedule(self, topic: str, tid: str, delay_ms: int, payload: bytes) -> None:
        known = self.model.get((topic, tid))
        timer = NewTimer(topic, tid, self.now_ms + delay_ms, payload)
        if known is not None and known.state in (TimerState.IN_FLIGHT, TimerState.DELIVERED):
            with pytest.raises(ConflictError) as caught:
                self.store.schedule([timer], self.now_ms)
            assert caught.value.state == known.state
            return
        [result] = self.store.schedule([timer], self.now_ms)
        assert result.replaced == (known is not None)
        assert result.deliver_at_ms >= self.now_ms + delay_ms  # never earlier than asked
        # nor later than asked (or than the next scan) by a clock stepped back: once a due
        # scan ran at the stepped time, or once the step is past the writers' tolerance
        stepped = self.scanned_ms is not None and self.scanned_ms > self.now_ms
        slack_ms = CLOCK_STEP_TOLERANCE_MS if stepped else 0
        assert result.deliver_at_ms <= max(self.now_ms + delay_ms, self.now_ms + 1 + slack_ms)
        self.model[(topic, tid)] = Model(TimerState.PENDING, result.deliver_at_ms, payload)

    @rule(advance_ms=st.integers(0, 40), limit=st.integers(1, 4))
    def due(self, advance_ms: int, limit: int) -> None:
        self.now_ms += advance_ms
        self.latest_ms = max(self.latest_ms, self.now_ms)
        self.scanned_ms = self.now_ms
        batch = self.store.due(self.now_ms, limit)
        for t in batch:
            known = self.model[(t.topic, t.id)]
            assert known.state == TimerState.PENDING and known.deliver_ms <= self.now_ms
            known.state = TimerState.IN_FLIGHT
        if batch:
            self.batches.append(batch)
        if len(batch) < limit:  # a scan short of its limit found every due timer
            missed = [
                key
                for key, m in self.model.items()
                if m.state == TimerState.PENDING and m.exact and m.deliver_ms <= self.now_ms
            ]
            assert missed == [], (self.now_ms, missed)

    @precondition(lambda self: self.batches)
    @rule(back_ms=st.integers(-5, 30))
    def retry(self, back_ms: int) -> None:
        batch = self.batches.pop()
        self.store.retry_later(batch, self.now_ms + back_ms, "boom")
        for t in batch:
            self.model[(t.topic, t.id)] = Model(
                TimerState.PENDING,
                self.now_ms + back_ms,
                t.record.payload,
                t.record.attempts + 1,
                exact=False,
            )

    @rule()
    def drain(self) -> None:
        """Far in the future every pending timer is due: none may be lost or duplicated."""
        self.now_ms = self.latest_ms = self.latest_ms + 10_000
        self.scanned_ms = self.now_ms
        pending = {k for k, m in self.model.items() if m.state == TimerState.PENDING}
        batch = self.store.due(self.now_ms, 1000)
        assert {(t.topic, t.id) for t in batch} == pending
        for t in batch:
            self.model[(t.topic, t.id)].state = TimerState.IN_FLIGHT
        if batch:
            self.batches.append(batch)

    @rule(back_ms=st.integers(1, 3 * CLOCK_STEP_TOLERANCE_MS))
    def step_clock_back(self, back_ms: int) -> None:
        self.now_ms -= back_ms

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
                assert (view.state, view.attempts, view.sink) == (
                    known.state, known.attempts, known.sink
                ), (topic, tid)  # fmt: skip
                if known.state != TimerState.DELIVERED:
                    assert view.payload == known.payload
                    assert view.deliver_at_ms >= known.deliver_ms
                    assert known.exact is False or view.deliver_at_ms == known.deliver_ms
        stats = self.store.stats()
        pending = sum(k.state != TimerState.DELIVERED for k in self.model.values())
        assert stats.pending == pending
        assert stats.delivered_by_sink == self.by_sink
        for topic in TOPICS:
            assert self.logged_ids(topic) == self.log.get(topic, [])
            tail = self.store.read_log(topic, 1, 100)
            assert [m.offset for m in tail] == list(range(1, len(self.log.get(topic, []))))


TestRocksVsModel = RocksVsModel.TestCase
TestRocksVsModel.settings = settings(
    max_examples=40,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
