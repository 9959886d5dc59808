"""A batch cancel answers and removes exactly what the same cancels one at a time do.

The batch path has a shortcut for the common batch (every identity pending, each given
once, none in flight or delivered) and skips the dead-letter lookup while the store holds
none; both must agree with the one-at-a-time answers over every mix of states.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from hypothesis import example, given, settings
from hypothesis import strategies as st

from storage.protocol import LOG_SINK, CancelOutcome, CancelResult, NewTimer, TimerState
from storage.rocks import RocksSettings, RocksTimerStore

NOW = 1_700_000_000_000
TOPICS = ("orders", "invoices")
# each identity's state before the cancel; "again": dead-lettered, then scheduled again
STATES = ("pending", "in_flight", "delivered", "dead", "again", "unknown")


@contextmanager
def store_with(states: list[str]) -> Iterator[RocksTimerStore]:
    """A store holding identity ``i`` (topic ``TOPICS[i % 2]``, id ``t{i}``) in ``states[i]``."""
    with tempfile.TemporaryDirectory() as path:
        store = RocksTimerStore(RocksSettings(path))
        try:
            _fill(store, states)
            yield store
        finally:
            store.close()


def _fill(store: RocksTimerStore, states: list[str]) -> None:
    def timer(i: int, deliver_ms: int) -> NewTimer:
        return NewTimer(TOPICS[i % 2], f"t{i}", deliver_ms, b"p", {})

    due_now = [i for i, s in enumerate(states) if s in ("in_flight", "delivered", "dead", "again")]
    later = [i for i, s in enumerate(states) if s == "pending"]
    store.schedule([timer(i, NOW) for i in due_now] + [timer(i, NOW + 60_000) for i in later], NOW)
    taken = {t.id: t for t in store.due(NOW, 1000)}
    assert sorted(taken) == sorted(f"t{i}" for i in due_now)
    delivered = [taken[f"t{i}"] for i in due_now if states[i] == "delivered"]
    store.commit_delivered(delivered, NOW, sink=LOG_SINK)
    dead = [taken[f"t{i}"] for i in due_now if states[i] in ("dead", "again")]
    store.dead_letter(dead, NOW, "sink down")
    again = [i for i, s in enumerate(states) if s == "again"]
    if again:
        store.schedule([timer(i, NOW + 60_000) for i in again], NOW)


def _answers(results: list[CancelResult]) -> list[tuple[CancelOutcome, TimerState | None]]:
    return [(r.outcome, r.state) for r in results]


def _what_is_left(store: RocksTimerStore, count: int) -> tuple[object, ...]:
    stats = store.stats()
    views = [store.get(TOPICS[i % 2], f"t{i}") for i in range(count)]
    letters = store.dead_letters(limit=1000)
    return (
        (stats.pending, stats.in_flight, stats.cancelled, stats.dead_lettered),
        stats.pending_by_topic,
        [None if v is None else v.state for v in views],
        sorted(letter.id for letter in letters.timers),
    )


def _model(states: list[str], picks: list[int]) -> list[tuple[CancelOutcome, TimerState | None]]:
    """What each cancel of ``picks`` answers, in order, by the states before the first."""
    removable = ("pending", "dead", "again")  # a dead letter is removed like a pending timer
    gone: set[int] = set()
    out: list[tuple[CancelOutcome, TimerState | None]] = []
    for i in picks:
        state = states[i] if i < len(states) else "unknown"
        if state in removable and i not in gone:
            gone.add(i)
            out.append((CancelOutcome.REMOVED, None))
        elif state == "in_flight":
            out.append((CancelOutcome.TOO_LATE, TimerState.IN_FLIGHT))
        elif state == "delivered":
            out.append((CancelOutcome.TOO_LATE, TimerState.DELIVERED))
        else:
            out.append((CancelOutcome.UNKNOWN, None))
    return out


@settings(max_examples=40, deadline=None)
@given(
    states=st.lists(st.sampled_from(STATES), min_size=1, max_size=8),
    picks=st.lists(st.integers(min_value=0, max_value=7), min_size=1, max_size=12),
)
@example(states=["pending", "pending"], picks=[0, 1, 0])  # the shortcut's shape, twice over
@example(states=["dead", "pending"], picks=[1, 0])  # a dead letter beside pending timers
@example(states=["again", "pending"], picks=[0, 1])  # pending with a dead letter behind it
def test_a_batch_cancel_agrees_with_cancels_one_at_a_time(
    states: list[str], picks: list[int]
) -> None:
    idents = [(TOPICS[i % 2], f"t{i}") for i in picks]  # an index past states: unknown
    with store_with(states) as batch_store, store_with(states) as single_store:
        batch = _answers(batch_store.cancel(idents))
        singles = [answer for ident in idents for answer in _answers(single_store.cancel([ident]))]
        assert batch == singles == _model(states, picks)
        left = _what_is_left(batch_store, 8)
        assert left == _what_is_left(single_store, 8)
        letters = [i for i, s in enumerate(states) if s in ("dead", "again") and i not in picks]
        assert left[3] == sorted(f"t{i}" for i in letters)  # no dead letter left behind


def test_a_batch_of_pending_timers_is_removed_whole_with_its_counts() -> None:
    """The shortcut's batch: every identity pending, over two topics."""
    with store_with(["pending"] * 6) as store:
        results = store.cancel([(TOPICS[i % 2], f"t{i}") for i in (5, 0, 3)])
        assert _answers(results) == [(CancelOutcome.REMOVED, None)] * 3
        stats = store.stats()
        assert (stats.pending, stats.cancelled) == (3, 3)
        assert stats.pending_by_topic == {"orders": 2, "invoices": 1}
        assert sorted(t.id for t in store.due(NOW + 60_000, 10)) == ["t1", "t2", "t4"]
