"""What the two stores' state-machine tests (``hypothesis.stateful``) share.

A store in a temporary directory, a plain model of every identity, the batches handed out
and not yet finished, the topic log and the deliveries by sink as the model expects them,
and the rules both stores answer alike: cancel, commit, release, housekeeping and a crash.
Each store's test adds the rules where the stores differ (its schedule, due scan, retry,
drain and clock) and checks the store against the model after every step.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

from storage.protocol import LOG_SINK, CancelOutcome, DueTimer, TimerState, TimerStore

NOW = 1_700_000_000_000
IDS = [f"t{i}" for i in range(6)]
TOPICS = ["a", "b"]


@dataclass
class Model:
    state: TimerState
    deliver_ms: int  # the key time the store answered
    payload: bytes
    attempts: int = 0
    sink: str | None = None
    exact: bool = True  # False after a retry: the store may clamp it behind the scanner


class StoreMachine(RuleBasedStateMachine):
    """The base of a store's state machine; ``open_store`` opens it in ``self.dir``."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="store-stateful-")
        self.store = self.open_store()
        self.now_ms = NOW
        self.latest_ms = NOW  # the clock's highest reading so far
        self.model: dict[tuple[str, str], Model] = {}
        self.batches: list[list[DueTimer]] = []
        self.log: dict[str, list[str]] = {}
        self.by_sink: dict[str, int] = {}

    def open_store(self) -> TimerStore:
        raise NotImplementedError

    def delivered(self, timer: DueTimer, sink: str) -> None:
        """Record in the model that ``timer`` was delivered to ``sink``."""
        raise NotImplementedError

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

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
            self.delivered(t, sink)
            if to_log:
                assert offset == len(self.log.setdefault(t.topic, []))
                self.log[t.topic].append(t.id)
            self.by_sink[sink] = self.by_sink.get(sink, 0) + 1

    @precondition(lambda self: self.batches)
    @rule()
    def release(self) -> None:
        batch = self.batches.pop()
        self.store.release(batch)
        for t in batch:
            self.model[(t.topic, t.id)].state = TimerState.PENDING

    @rule()
    def housekeep(self) -> None:
        """Whatever it drops (RocksDB: keys below the watermark; the wheel: segments
        nothing points into), no live timer or logged message may go with it."""
        self.store.housekeep(self.now_ms)

    @rule()
    def restart(self) -> None:
        """A crash: in-flight timers become pending again; everything acknowledged stays."""
        self.store.simulate_crash()  # type: ignore[attr-defined]  # both stores have it
        self.store = self.open_store()
        for known in self.model.values():
            if known.state == TimerState.IN_FLIGHT:
                known.state = TimerState.PENDING
        self.batches.clear()

    def logged_ids(self, topic: str) -> list[str]:
        return [m.id for m in self.store.read_log(topic, 0, 1000)]
