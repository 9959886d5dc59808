"""The RocksDB store against a plain in-memory model, step by step (hypothesis.stateful).

Schedule, reschedule, cancel, due, commit (whole batches and parts of them), retry,
release, housekeeping, the clock stepping back and restart interleave on a real RocksDB
in a temporary directory; after every step the store's view of every identity, its
counters and its topic log must equal the model's. Whole-batch commits take the
delete_range path, partial ones the point deletes, and releases and retries rewind the
scanner, so the range bookkeeping is exercised too.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from storage.errors import ConflictError
from storage.protocol import LOG_SINK, CancelOutcome, DueTimer, NewTimer, TimerState
from storage.rocks import RocksSettings, RocksTimerStore
from storage.rocks.core import CLOCK_STEP_TOLERANCE_MS

NOW = 1_700_000_000_000
IDS = [f"t{i}" for i in range(6)]
TOPICS = ["a", "b"]


@dataclass
class Model:
    state: TimerState
    deliver_ms: int
    payload: bytes
    attempts: int = 0
    sink: str | None = None
    exact: bool = True  # False after a retry: the store may clamp it behind the scanner


class RocksVsModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="rocks-stateful-")
        self.settings = RocksSettings(self.dir + "/db")
        self.store = RocksTimerStore(self.settings)
        self.now_ms = NOW
        self.latest_ms = NOW  # the clock's highest reading so far
        self.scanned_ms: int | None = None  # the time of the last due scan
        self.model: dict[tuple[str, str], Model] = {}
        self.batches: list[list[DueTimer]] = []
        self.log: dict[str, list[str]] = {}
        self.by_sink: dict[str, int] = {}

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

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

    @rule(topic=st.sampled_from(TOPICS), tid=st.sampled_from(IDS))
    def cancel(self, topic: str, tid: str) -> None:
        [result] = self.store.cancel([(topic, tid)])
        known = self.model.get((topic, tid))
        if known is None:
            assert result.outcome == CancelOutcome.UNKNOWN
        elif known.state == TimerState.PENDING:
            assert result.outcome == CancelOutcome.REMOVED
            del self.model[(topic, tid)]
        else:
            assert (result.outcome, result.state) == (CancelOutcome.TOO_LATE, known.state)

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

    @precondition(lambda self: self.batches)
    @rule(whole=st.booleans(), to_log=st.booleans())
    def commit(self, whole: bool, to_log: bool) -> None:
        batch = self.batches.pop(0)
        part = batch if whole or len(batch) == 1 else batch[: len(batch) // 2]
        if part is not batch:
            self.batches.insert(0, batch[len(part) :])
        sink = LOG_SINK if to_log else "callback"
        offsets = self.store.commit_delivered(part, self.now_ms, sink=sink)
        for t, offset in zip(part, offsets, strict=True):
            known = self.model[(t.topic, t.id)]
            known.state, known.sink = TimerState.DELIVERED, sink
            known.attempts += 1
            if to_log:
                assert offset == len(self.log.setdefault(t.topic, []))
                self.log[t.topic].append(t.id)
            self.by_sink[sink] = self.by_sink.get(sink, 0) + 1

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

    @precondition(lambda self: self.batches)
    @rule()
    def release(self) -> None:
        batch = self.batches.pop()
        self.store.release(batch)
        for t in batch:
            self.model[(t.topic, t.id)].state = TimerState.PENDING

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

    @rule()
    def housekeep(self) -> None:
        """Advances the watermark and range-deletes below it: it must never take a live key."""
        self.store.housekeep(self.now_ms)

    @rule()
    def restart(self) -> None:
        """A crash: in-flight timers become pending again; everything acknowledged stays."""
        self.store.simulate_crash()
        self.store = RocksTimerStore(self.settings)
        for known in self.model.values():
            if known.state == TimerState.IN_FLIGHT:
                known.state = TimerState.PENDING
        self.batches.clear()

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
            logged = [m.id for m in self.store.read_log(topic, 0, 100)]
            assert logged == self.log.get(topic, [])
            tail = self.store.read_log(topic, 1, 100)
            assert [m.offset for m in tail] == list(range(1, len(self.log.get(topic, []))))


TestRocksVsModel = RocksVsModel.TestCase
TestRocksVsModel.settings = settings(
    max_examples=40,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
