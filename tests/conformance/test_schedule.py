"""Schedule, reschedule, get and list: the same answers from both stores."""

from __future__ import annotations

import pytest

from app.engine import Engine
from storage.errors import ConflictError, InvalidInputError
from storage.protocol import NewTimer, TimerState
from tests.conformance.conftest import NOW, ready_ms


def nt(timer_id: str, deliver_ms: int, topic: str = "orders", payload: bytes = b"p") -> NewTimer:
    return NewTimer(topic, timer_id, deliver_ms, payload, {"k": "v"})


def test_schedule_then_get_returns_the_pending_timer(store):
    [result] = store.schedule([nt("a", NOW + 500, payload=b"hello")], NOW)
    assert (result.deliver_at_ms, result.created_at_ms, result.replaced) == (NOW + 500, NOW, False)
    view = store.get("orders", "a")
    assert view is not None and view.state == TimerState.PENDING
    assert (view.payload, view.headers, view.deliver_at_ms) == (b"hello", {"k": "v"}, NOW + 500)
    assert view.requested_deliver_at_ms == NOW + 500
    assert store.get("orders", "nope") is None
    stats = store.stats()
    assert (stats.pending, stats.pending_by_topic) == (1, {"orders": 1})


def test_reschedule_is_an_atomic_upsert_that_never_duplicates(store, clock):
    store.schedule([nt("a", NOW + 500)], NOW)
    [again] = store.schedule([nt("a", NOW + 900, payload=b"new")], NOW)
    store.schedule([nt("a", NOW + 900, payload=b"new")], NOW)  # the same request resent
    assert again.replaced
    page = store.list_pending(limit=10)
    assert [(v.id, v.deliver_at_ms, v.payload) for v in page.timers] == [("a", NOW + 900, b"new")]
    assert store.stats().pending_by_topic == {"orders": 1}
    assert store.due(ready_ms(store, NOW + 500), 10) == []  # the old time is gone
    engine = Engine(store, clock)
    engine.run_once(ready_ms(store, NOW + 900))
    assert [(m.id, m.payload) for m in store.read_log("orders", 0, 10)] == [("a", b"new")]


def test_duplicates_within_one_batch_last_wins(store):
    store.schedule([nt("a", NOW + 10), nt("a", NOW + 20), nt("b", NOW + 30)], NOW)
    assert [(v.id, v.deliver_at_ms) for v in store.list_pending().timers] == [
        ("a", NOW + 20),
        ("b", NOW + 30),
    ]
    assert store.stats().pending == 2


def test_an_identity_moved_back_and_forth_within_one_batch_keeps_only_its_last_time(store):
    """The store may reorder a batch's writes (the RocksDB store writes them in key order):
    the writes on one key, and on one identity, must keep the batch's order."""
    times = {"a": (20, 10, 20), "b": (5, 15, 5), "c": (30, 40)}
    store.schedule([nt(i, NOW + t) for i, ts in times.items() for t in ts], NOW)
    expected = [("b", NOW + 5), ("a", NOW + 20), ("c", NOW + 40)]
    assert [(v.id, v.deliver_at_ms) for v in store.list_pending().timers] == expected
    assert [(i, store.get("orders", i).deliver_at_ms) for i, _ in expected] == expected
    assert store.stats().pending == 3
    assert sorted(t.id for t in store.due(NOW + 100, 100)) == ["a", "b", "c"]


def test_list_is_ordered_by_time_then_topic_then_id_and_pages_with_a_cursor(store):
    timers = [nt(f"t{i:03d}", NOW + 1000 - 10 * (i % 7), topic=f"q{i % 2}") for i in range(60)]
    store.schedule(timers, NOW)
    expected = sorted((t.deliver_at_ms, t.topic, t.id) for t in timers)
    seen, cursor = [], None
    for _ in range(20):  # bounded: 9 pages are expected; a cursor that never ends fails
        page = store.list_pending(limit=7, cursor=cursor)
        seen += [(v.deliver_at_ms, v.topic, v.id) for v in page.timers]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert cursor is None, f"paging did not end after 20 pages ({len(seen)} timers seen)"
    assert seen == expected
    window = store.list_pending(from_ms=NOW + 960, to_ms=NOW + 980, topic="q1", limit=100)
    assert [(v.deliver_at_ms, v.topic, v.id) for v in window.timers] == [
        k for k in expected if NOW + 960 <= k[0] <= NOW + 980 and k[1] == "q1"
    ]
    with pytest.raises(InvalidInputError):
        store.list_pending(cursor="%%%not-base64")


def test_invalid_names_are_refused_naming_the_field(store):
    with pytest.raises(InvalidInputError) as err:
        store.schedule([nt("has space", NOW)], NOW)
    assert err.value.field == "id"
    with pytest.raises(InvalidInputError) as err:
        store.cancel([("bad/topic", "x")])
    assert err.value.field == "topic"


def test_schedule_of_an_in_flight_timer_is_a_conflict(store):
    store.schedule([nt("a", NOW)], NOW)
    [due] = store.due(ready_ms(store, NOW), 10)
    with pytest.raises(ConflictError) as err:
        store.schedule([nt("a", NOW + 5000)], NOW)
    assert err.value.state == TimerState.IN_FLIGHT
    assert store.get("orders", "a").state == TimerState.IN_FLIGHT
    store.release([due])
    assert store.get("orders", "a").state == TimerState.PENDING


def test_schedule_of_a_delivered_id(store, clock):
    """RocksDB remembers deliveries (done family) and refuses; the wheel keeps no record of
    deliveries by id, so the same id is a new timer there (documented in docs/wheel.md)."""
    store.schedule([nt("a", NOW)], NOW)
    Engine(store, clock).run_once(ready_ms(store, NOW))
    if store.name == "rocks":
        with pytest.raises(ConflictError) as err:
            store.schedule([nt("a", NOW + 5000)], NOW)
        assert err.value.state == TimerState.DELIVERED
        assert store.get("orders", "a").state == TimerState.DELIVERED
    else:
        assert store.get("orders", "a") is None
        [again] = store.schedule([nt("a", NOW + 5000)], NOW)
        assert not again.replaced and store.stats().pending == 1


def test_count_pending_due_before(store):
    store.schedule([nt(f"c{i}", NOW + 100 * i) for i in range(10)], NOW)
    assert store.count_pending_due_before([NOW + 250, NOW + 550, NOW + 10_000], 100) == [3, 6, 10]
    assert store.count_pending_due_before([NOW + 10_000], 4) == [4]
