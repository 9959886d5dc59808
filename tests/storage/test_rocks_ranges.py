"""Format 3: a clean due batch is committed by one journal page and a ``ranges`` entry.

Such a commit writes nothing per timer in ``ids`` (the pending key time stays there), so
every reader of ``ids`` must tell "pending" from "delivered by a range" by the timer key
being gone: these tests pin that on a real RocksDB, for both kinds of commit.
"""

from __future__ import annotations

import pytest

from storage.errors import ConflictError
from storage.protocol import LOG_SINK, CancelOutcome, NewTimer, TimerState
from storage.rocks import RocksSettings, RocksTimerStore
from storage.rocks import keys as layout

NOW = 1_700_000_000_000


@pytest.fixture
def settings(tmp_path):
    return RocksSettings(str(tmp_path / "rocks"), done_retention_ms=10_000)


def _raw(store: RocksTimerStore, family: str) -> list[tuple[bytes, bytes]]:
    return list(store.handles.cfs[family].items())


def test_a_clean_batch_writes_one_page_and_one_range_and_no_ids(settings):
    store = RocksTimerStore(settings)
    try:
        store.schedule([NewTimer("o", f"t{i}", NOW + i, b"x") for i in range(5)], NOW - 100)
        ids_before = _raw(store, "ids")
        due = store.due(NOW + 10, 100)
        assert store.commit_delivered(due, NOW + 20, sink=LOG_SINK) == [0, 1, 2, 3, 4]
        assert _raw(store, "ids") == ids_before  # the pending key times, untouched
        [(first, value)] = _raw(store, "ranges")
        journal_key, last = layout.split_range_value(value)
        assert (first, last) == (due[0].key, due[-1].key)
        assert [k for k, _ in _raw(store, "journal")] == [journal_key]
        view = store.get("o", "t3")
        assert (view.state, view.delivered_at_ms, view.offset, view.sink) == (
            TimerState.DELIVERED, NOW + 20, 3, LOG_SINK,
        )  # fmt: skip
        assert (view.deliver_at_ms, view.requested_deliver_at_ms) == (NOW + 3, NOW + 3)
        assert (view.created_at_ms, view.attempts) == (NOW - 100, 1)
    finally:
        store.close()


def _deliver_two_clean_ranges(store: RocksTimerStore) -> None:
    store.schedule([NewTimer("o", f"t{i}", NOW) for i in range(4)], NOW - 100)
    store.commit_delivered(store.due(NOW, 2), NOW + 1, sink=LOG_SINK)  # t0, t1
    store.commit_delivered(store.due(NOW, 2), NOW + 2, sink="webhook")  # t2, t3


@pytest.mark.parametrize("restart", [False, True])
def test_range_deliveries_refuse_reschedule_and_cancel(settings, restart):
    store = RocksTimerStore(settings)
    _deliver_two_clean_ranges(store)
    assert len(_raw(store, "ranges")) == 2
    if restart:  # the highest range's last key is read back from disk
        store.close()
        store = RocksTimerStore(settings)
    try:
        for timer_id in ("t0", "t3"):
            with pytest.raises(ConflictError, match="already delivered") as caught:
                store.schedule([NewTimer("o", timer_id, NOW + 5000)], NOW + 10)
            assert caught.value.state == TimerState.DELIVERED
        results = store.cancel([("o", "t1"), ("o", "t2"), ("o", "nope")])
        assert [(r.outcome, r.state) for r in results] == [
            (CancelOutcome.TOO_LATE, TimerState.DELIVERED),
            (CancelOutcome.TOO_LATE, TimerState.DELIVERED),
            (CancelOutcome.UNKNOWN, None),
        ]
        assert [store.get("o", f"t{i}").sink for i in range(4)] == [LOG_SINK] * 2 + ["webhook"] * 2
        assert store.stats().pending == 0 and store.stats().delivered == 4
    finally:
        store.close()


def test_a_timer_pending_inside_a_committed_range_stays_pending(settings):
    """After a release rewinds the cursor, timers pending below a committed range are not
    taken for deliveries, and a batch starting there is delivered the format-2 way."""
    store = RocksTimerStore(settings)
    try:
        store.schedule([NewTimer("o", n, NOW) for n in ("a", "b", "b2", "c", "d")], NOW - 100)
        first = store.due(NOW, 3)  # a, b, b2
        store.commit_delivered(store.due(NOW, 2), NOW + 1, sink=LOG_SINK)  # c, d: a range
        store.release(first)  # pending again, below the range's last key
        assert [store.get("o", n).state for n in ("a", "b", "b2")] == [TimerState.PENDING] * 3
        [moved] = store.schedule([NewTimer("o", "a", NOW + 1)], NOW)  # reschedule: allowed
        assert moved.replaced
        [removed] = store.cancel([("o", "b2")])
        assert removed.outcome is CancelOutcome.REMOVED
        due = store.due(NOW + 1, 10)
        assert [t.id for t in due] == ["b", "a"]  # b at its old key, inside c..d's range
        store.commit_delivered(due, NOW + 3, sink=LOG_SINK)
        assert len(_raw(store, "ranges")) == 1  # not above the range: delivered records
        records = dict(_raw(store, "ids"))
        assert len(records[b"o\0a"]) > 8 and len(records[b"o\0b"]) > 8
        assert b"o\0b2" not in records
        views = {n: store.get("o", n) for n in "abcd"}
        assert {n: (v.state, v.delivered_at_ms) for n, v in views.items()} == {
            "a": (TimerState.DELIVERED, NOW + 3),
            "b": (TimerState.DELIVERED, NOW + 3),
            "c": (TimerState.DELIVERED, NOW + 1),
            "d": (TimerState.DELIVERED, NOW + 1),
        }
        assert sorted(e.id for e in store.journal()) == ["a", "b", "c", "d"]
    finally:
        store.close()


def test_expiry_forgets_range_pages_and_their_identities_can_come_back(settings):
    store = RocksTimerStore(settings)
    try:
        _deliver_two_clean_ranges(store)
        assert store.housekeep(NOW + 2 + 10_000).done_expired == 2  # the first page only
        assert [store.get("o", f"t{i}") is None for i in range(4)] == [True, True, False, False]
        assert len(_raw(store, "ranges")) == 1
        assert [e.id for e in store.journal()] == ["t2", "t3"]
        [again] = store.schedule([NewTimer("o", "t0", NOW + 20_000)], NOW + 12_000)
        assert not again.replaced and store.get("o", "t0").state is TimerState.PENDING
        assert store.housekeep(NOW + 3 + 10_000).done_expired == 2
        assert _raw(store, "ranges") == [] and [k for k, _ in _raw(store, "ids")] == [b"o\0t0"]
    finally:
        store.close()


def test_a_batch_committed_out_of_key_order_is_still_found_delivered(settings):
    """A webhook lane settles its timers in the order the POSTs answered, not in key
    order. Such a batch can still begin and end with the scanned range's first and last
    keys, but its page is looked up by bisection, so it must not be committed as a range:
    every timer of it reads back delivered (CI, 27 Nov: a GET after it answered None)."""
    store = RocksTimerStore(settings)
    try:
        store.schedule([NewTimer("o", f"t{i}", NOW) for i in range(4)], NOW - 100)
        due = store.due(NOW, 10)
        answered = [due[0], due[2], due[1], due[3]]  # first and last as scanned, not between
        store.commit_delivered(answered, NOW + 1, sink="webhook")
        views = [store.get("o", f"t{i}") for i in range(4)]
        assert [v.state if v else None for v in views] == [TimerState.DELIVERED] * 4
        results = store.cancel([("o", f"t{i}") for i in range(4)])
        assert {r.outcome for r in results} == {CancelOutcome.TOO_LATE}
        assert store.stats().delivered == 4
    finally:
        store.close()
