"""The RocksDB store's races, driven deterministically on a real RocksDB: housekeeping
against an ingest, a call against close(), stats against a commit.

``GatedLock`` stands in for ``core.lock`` (a real lock with gates for one watched thread),
so a test decides which thread is where when the other acts, instead of sleeping and
hoping.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
import rocksdict as rd

from storage.errors import StoreClosedError
from storage.protocol import LOG_SINK, DueTimer, IngestReport, NewTimer, TimerState
from storage.rocks import (
    RocksSettings,
    RocksTimerStore,
    delivery,
    housekeeping,
    ingest,
    reads,
    writes,
)
from storage.rocks.core import RocksCore
from storage.rocks.counters import SINK_TOTAL_PREFIX, CounterDelta
from tests.pipeline.helpers import LIMITS, NOW, row, stage

WAIT_S = 10  # the deadline of every wait on another thread


class Gate:
    """One point in a watched thread: it reports reaching it and, if held, waits there."""

    def __init__(self, *, hold: bool) -> None:
        self.reached = threading.Event()
        self._open = threading.Event()
        if not hold:
            self._open.set()

    def open(self) -> None:
        self._open.set()

    def pass_through(self) -> None:
        self.reached.set()
        if not self._open.wait(WAIT_S):
            raise RuntimeError("the test never opened the gate")


class GatedLock:
    """``core.lock`` with gates for one watched thread: before its n-th acquire and after
    its n-th release (counted from 1). Every other thread uses it as a plain lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watched: int | None = None
        self._acquires = 0
        self._releases = 0
        self.before_acquire: dict[int, Gate] = {}
        self.after_release: dict[int, Gate] = {}

    def watch_me(self) -> None:
        self._watched = threading.get_ident()

    def _watching(self) -> bool:
        return threading.get_ident() == self._watched

    def acquire(self) -> bool:
        if self._watching():
            self._acquires += 1
            gate = self.before_acquire.get(self._acquires)
            if gate is not None:
                gate.pass_through()
        return self._lock.acquire()

    def release(self) -> None:
        self._lock.release()
        if self._watching():
            self._releases += 1
            gate = self.after_release.get(self._releases)
            if gate is not None:
                gate.pass_through()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


class HookedCore(RocksCore):
    """A real core whose next write first runs ``before_write`` (once) in the writer."""

    before_write: Callable[[], None] | None = None

    def write(self, batch: rd.WriteBatch, delta: CounterDelta | None = None) -> None:
        hook, self.before_write = self.before_write, None
        if hook is not None:
            hook()
        super().write(batch, delta)


def nt(timer_id: str, deliver_ms: int, topic: str = "t") -> NewTimer:
    return NewTimer(topic, timer_id, deliver_ms, b"p")


def run_in_thread(target: Callable[[], Any], lock: GatedLock) -> tuple[threading.Thread, dict]:
    """Start ``target`` in a thread that ``lock`` watches; its result or error lands in
    the returned dict."""
    outcome: dict[str, Any] = {}

    def body() -> None:
        lock.watch_me()
        try:
            outcome["result"] = target()
        except Exception as exc:  # handed to the test, which asserts on it
            outcome["error"] = exc

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread, outcome


# ------------------------------------------------------------- housekeeping and ingest


def test_housekeeping_range_delete_cannot_remove_keys_an_ingest_just_linked(tmp_path):
    """An ingest links keys below the watermark and then moves them up, under the lock;
    housekeeping advanced the watermark just before. Its range delete must not land in
    between (it did, lock-free, and the imported timer was lost while counted pending)."""
    settings = RocksSettings(str(tmp_path / "rocks"))
    stage_dir = tmp_path / "stage"
    stage_dir.mkdir()
    stage(stage_dir, [row("t", "late", NOW + 100)])  # below the watermark to come
    core = HookedCore(settings)
    try:
        writes.schedule(core, [nt("a", NOW + 10)], NOW)
        delivered = delivery.due(core, NOW + 5000, 10)
        delivery.commit_delivered(core, delivered, NOW + 5000, LOG_SINK)  # scanned to NOW+5000
        report = _ingest_while_housekeeping_is_between_its_steps(core, str(stage_dir))
    finally:
        core.close()
    assert report.moved_past_due == 1

    store = RocksTimerStore(settings)
    try:
        view = store.get("t", "late")
        assert view is not None and view.state == TimerState.PENDING
        assert store.stats().pending == 1
        assert [t.id for t in store.due(NOW + 10**7, 10)] == ["late"]
    finally:
        store.close()


def _ingest_while_housekeeping_is_between_its_steps(
    core: HookedCore, stage_dir: str
) -> IngestReport:
    """Housekeeping advances the watermark and releases the lock; the ingest links its
    files; housekeeping then does all it does without the lock (it did the range delete
    there) and comes back for the lock; the ingest moves its keys up and ends."""
    lock = core.lock = GatedLock()  # type: ignore[assignment]
    between_steps = lock.after_release[1] = Gate(hold=True)  # the watermark is written
    back_for_lock = lock.before_acquire[2] = Gate(hold=False)  # its lock-free work is done
    thread, outcome = run_in_thread(lambda: housekeeping.housekeep(core, NOW + 5000), lock)
    try:
        assert between_steps.reached.wait(WAIT_S)
        assert core.counters.watermark_ms > NOW + 100

        def let_housekeeping_run() -> None:  # the ingest has linked its files, not moved them
            between_steps.open()
            assert back_for_lock.reached.wait(WAIT_S)

        core.before_write = let_housekeeping_run
        report = ingest.ingest_staged(core, stage_dir, limits=LIMITS)
    finally:
        between_steps.open()
        thread.join(WAIT_S)
    assert not thread.is_alive()
    assert "error" not in outcome, outcome
    assert outcome["result"].watermark_advanced
    return report


# ------------------------------------------------------------- calls racing close()


def _ops() -> dict[str, Callable[[RocksTimerStore, list[DueTimer]], object]]:
    return {
        "schedule": lambda s, b: s.schedule([nt("b", NOW)], NOW),
        "cancel": lambda s, b: s.cancel([("t", "b")]),
        "commit_delivered": lambda s, b: s.commit_delivered(b, NOW, sink=LOG_SINK),
        "retry_later": lambda s, b: s.retry_later(b, NOW + 1000, "x"),
        "dead_letter": lambda s, b: s.dead_letter(b, NOW, "x"),
        "replay_dead_letter": lambda s, b: s.replay_dead_letter("t", "d", NOW),
        "purge_dead_letters": lambda s, b: s.purge_dead_letters(),
        "housekeep": lambda s, b: s.housekeep(NOW),
    }


@pytest.mark.parametrize("op", sorted(_ops()))
def test_a_call_waiting_for_the_lock_while_close_takes_it_gets_store_closed(rocks_store, op):
    rocks_store.schedule([nt("d", NOW)], NOW - 1)
    rocks_store.dead_letter(rocks_store.due(NOW, 10), NOW, "boom")
    rocks_store.schedule([nt("a", NOW + 10)], NOW)
    batch = rocks_store.due(NOW + 10, 10)
    assert [t.id for t in batch] == ["a"]
    lock = GatedLock()
    rocks_store.core.lock = lock  # type: ignore[assignment]
    waiting = lock.before_acquire[1] = Gate(hold=True)
    thread, outcome = run_in_thread(lambda: _ops()[op](rocks_store, batch), lock)
    try:
        assert waiting.reached.wait(WAIT_S)  # the call is at the lock: close() wins it
        rocks_store.close()
    finally:
        waiting.open()
        thread.join(WAIT_S)
    assert not thread.is_alive()
    assert isinstance(outcome.get("error"), StoreClosedError), outcome


_READS: dict[str, tuple[str, Callable[[RocksTimerStore], object]]] = {
    "get": ("get_timer", lambda s: s.get("t", "a")),
    "list_pending": ("list_pending", lambda s: s.list_pending()),
    "count_pending_due_before": (
        "count_keys_before",
        lambda s: s.count_pending_due_before([NOW + 20], 10),
    ),
    "read_log": ("read_log", lambda s: s.read_log("logged", 0, 10)),
    "dead_letters": ("dead_letters", lambda s: s.dead_letters()),
}


@pytest.mark.parametrize("op", sorted(_READS))
def test_close_waits_for_a_read_in_progress(rocks_store, monkeypatch, op):
    """A read takes no lock; close() waits for it to end, and then closes (a read racing
    close used the cleared handles: KeyError, a 500 at the API)."""
    rocks_store.schedule([nt("l", NOW, topic="logged")], NOW - 2)
    rocks_store.commit_delivered(rocks_store.due(NOW, 10), NOW, sink=LOG_SINK)
    rocks_store.schedule([nt("d", NOW)], NOW - 1)
    rocks_store.dead_letter(rocks_store.due(NOW, 10), NOW, "boom")
    rocks_store.schedule([nt("a", NOW + 10)], NOW)
    function_name, call = _READS[op]
    expected = call(rocks_store)  # before the gate goes in
    inside = Gate(hold=True)
    original = getattr(reads, function_name)

    def gated(*args: Any, **kwargs: Any) -> object:
        inside.pass_through()
        return original(*args, **kwargs)

    monkeypatch.setattr(reads, function_name, gated)
    reader, outcome = run_in_thread(lambda: call(rocks_store), GatedLock())
    closer = threading.Thread(target=rocks_store.close, daemon=True)
    try:
        assert inside.reached.wait(WAIT_S)  # the read is under way
        closer.start()
        _wait_until(lambda: rocks_store.core.closed)  # close() has begun
    finally:
        inside.open()
        reader.join(WAIT_S)
    closer.join(WAIT_S)
    assert not reader.is_alive() and not closer.is_alive()
    assert outcome == {"result": expected}
    with pytest.raises(StoreClosedError):
        call(rocks_store)


def _wait_until(condition: Callable[[], bool]) -> None:
    for _ in range(WAIT_S * 100):
        if condition():
            return
        threading.Event().wait(0.01)
    raise AssertionError("the condition did not come true in time")


# ------------------------------------------------------------- stats during a commit


class _CommitsWhenRead(str):
    """A ``totals`` name whose first ``startswith`` (stats' sink filter) runs a commit to
    a new sink in another thread: the commit adds a total while stats reads them."""

    commit: Callable[[], object] | None = None
    committed = False

    def startswith(self, *args: Any) -> bool:  # type: ignore[override]
        commit, type(self).commit = type(self).commit, None
        if commit is not None:
            thread = threading.Thread(target=commit, daemon=True)
            thread.start()
            thread.join(WAIT_S)
            type(self).committed = not thread.is_alive()
        return super().startswith(*args)


def test_stats_reads_a_snapshot_while_a_commit_adds_a_sink(rocks_store):
    rocks_store.schedule([nt("a", NOW)], NOW)
    batch = rocks_store.due(NOW, 10)
    _CommitsWhenRead.committed = False
    _CommitsWhenRead.commit = lambda: rocks_store.commit_delivered(batch, NOW, sink="new-sink")
    rocks_store.core.counters.totals[_CommitsWhenRead(SINK_TOTAL_PREFIX + "probe")] = 1
    try:
        stats = rocks_store.stats()
    finally:
        _CommitsWhenRead.commit = None
    assert _CommitsWhenRead.committed  # the commit ran while stats read the totals
    assert stats.delivered_by_sink.get("probe") == 1
    assert rocks_store.stats().delivered_by_sink["new-sink"] == 1


def test_a_log_read_between_a_commits_write_and_its_counters_sees_nothing_past_the_end(
    rocks_store, monkeypatch
):
    """A commit's page is in RocksDB before its offsets are published (``CounterDelta.apply``
    follows ``db.write``). A read in between returned those messages, and the consumer's
    commit of the next offset was a 409 "past the log end" (a 30-minute soak hit it)."""
    rocks_store.schedule([nt("a", NOW), nt("b", NOW)], NOW)
    batch = rocks_store.due(NOW, 10)
    written, apply = Gate(hold=True), CounterDelta.apply

    def apply_after_the_gate(delta: CounterDelta) -> None:
        if delta.offsets:  # the commit's delta: the page is written, the end not yet moved
            written.pass_through()
        apply(delta)

    monkeypatch.setattr(CounterDelta, "apply", apply_after_the_gate)
    committer = threading.Thread(
        target=rocks_store.commit_delivered, args=(batch, NOW), kwargs={"sink": LOG_SINK}
    )
    committer.start()
    try:
        assert written.reached.wait(WAIT_S)
        read = rocks_store.read_log("t", 0, 10)
        ends = [row.log_end_offset for row in rocks_store.topics() if row.topic == "t"]
    finally:
        written.open()
        committer.join(WAIT_S)
    assert read == [] and ends in ([], [0])  # nothing published yet, nothing readable
    assert [m.offset for m in rocks_store.read_log("t", 0, 10)] == [0, 1]  # and after it
