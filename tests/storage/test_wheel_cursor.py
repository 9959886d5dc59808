"""The wheel store's cursors follow the RocksDB store's rule (``storage.cursors``): a
cursor of a key is a position in the RocksDB key order, and both stores page alike.

Real stores in temporary directories, the same timers in each; the RocksDB store is the
reference the wheel must match.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from storage.cursors import encode_cursor
from storage.errors import InvalidInputError
from storage.protocol import NewTimer, TimerPage, TimerStore
from tests.conformance.conftest import NOW, STORES, open_store, ready_ms

BAD_CURSORS = ("%%%not-base64", "AB", "", "A===", "AAA", "AAAA", "AAAAAAAA")


def cursor_of(key: bytes) -> str:
    return encode_cursor(key)  # as the server issues it: a cursor of that position


def timer_cursor(ms: int, rest: bytes = b"") -> str:
    """A cursor naming the RocksDB timer key ``u64be(ms) | rest`` (topic 0x00 id)."""
    return cursor_of(ms.to_bytes(8, "big") + rest)


@pytest.fixture
def stores(tmp_path) -> Iterator[dict[str, TimerStore]]:
    opened = {kind: open_store(kind, str(tmp_path / kind)) for kind in STORES}
    yield opened
    for store in opened.values():
        store.close()


def _ids(page: TimerPage) -> list[str]:
    return [f"{v.topic}/{v.id}" for v in page.timers]


def _schedule(stores: dict[str, TimerStore]) -> None:
    for store in stores.values():
        store.schedule([NewTimer("orders", f"a{i:02d}", NOW + 10 * i) for i in range(25)], NOW)
        # the same milliseconds as a00..a04: within one, topic then id decide the order
        store.schedule([NewTimer("mail", f"b{i}", NOW + 10 * i) for i in range(5)], NOW)


def test_any_well_formed_cursor_is_a_position_on_the_wheel(stores):
    _schedule(stores)
    wheel = stores["wheel"]
    assert _ids(wheel.list_pending(cursor=cursor_of(b"\x00"), limit=3)) == [
        "mail/b0",
        "orders/a00",
        "mail/b1",
    ]
    after_a09 = wheel.list_pending(topic="orders", cursor=timer_cursor(NOW + 90, b"orders\0a09"))
    assert [v.id for v in after_a09.timers] == [f"a{i:02d}" for i in range(10, 25)]
    # a cursor between mail/b2 and orders/a02 in their millisecond, and one cut short
    mid = wheel.list_pending(cursor=timer_cursor(NOW + 20, b"n"), limit=2)
    assert _ids(mid) == ["orders/a02", "mail/b3"]
    short = cursor_of(NOW.to_bytes(8, "big")[:7])  # 7 bytes: at or before NOW
    assert _ids(wheel.list_pending(cursor=short, limit=1)) == ["mail/b0"]
    assert wheel.list_pending(cursor=cursor_of(b"\xff" * 9)).timers == []


@pytest.mark.parametrize(
    "cursor",
    [
        cursor_of(b"\x00"),
        timer_cursor(NOW + 90, b"orders\0a09"),
        timer_cursor(NOW + 20, b"n"),
        timer_cursor(NOW + 20, b"mail\0b2"),
        timer_cursor(NOW + 95),
        cursor_of(NOW.to_bytes(8, "big")[:5]),
        cursor_of(b"\xff" * 9),
    ],
)
def test_the_wheel_answers_a_cursor_as_the_rocksdb_store_does(stores, cursor):
    _schedule(stores)
    pages = {kind: s.list_pending(cursor=cursor, limit=4) for kind, s in stores.items()}
    assert _ids(pages["wheel"]) == _ids(pages["rocks"])
    assert pages["wheel"].next_cursor == pages["rocks"].next_cursor


def test_pages_and_their_cursors_are_the_same_in_both_stores(stores):
    _schedule(stores)
    cursors = {kind: None for kind in stores}
    seen: dict[str, list[str]] = {kind: [] for kind in stores}
    for _ in range(10):  # bounded: 5 pages are expected; a cursor that never ends fails
        pages = {kind: s.list_pending(limit=7, cursor=cursors[kind]) for kind, s in stores.items()}
        for kind, page in pages.items():
            seen[kind] += _ids(page)
            cursors[kind] = page.next_cursor
        assert cursors["wheel"] == cursors["rocks"]
        if cursors["wheel"] is None:
            break
    assert cursors["wheel"] is None, f"paging did not end after 10 pages: {seen['wheel']}"
    assert seen["wheel"] == seen["rocks"] and len(seen["wheel"]) == 30


def test_dead_letter_cursors_are_positions_named_cursor(stores):
    for store in stores.values():
        timers = [NewTimer(t, f"d{i}", NOW) for t in ("mail", "orders") for i in range(3)]
        store.schedule(timers, NOW)
        store.dead_letter(store.due(ready_ms(store, NOW), 100), NOW, "boom")
    wheel = stores["wheel"]
    assert _ids(wheel.dead_letters(limit=2, after=cursor_of(b"\x00"))) == ["mail/d0", "mail/d1"]
    after_d0 = wheel.dead_letters(topic="orders", after=cursor_of(b"orders\0d0"))
    assert _ids(after_d0) == ["orders/d1", "orders/d2"]
    for key in (b"\x00", b"mail\0d2", b"n", b"orders\0d0"):
        after = cursor_of(key)
        pages = {kind: s.dead_letters(limit=2, after=after) for kind, s in stores.items()}
        assert _ids(pages["wheel"]) == _ids(pages["rocks"]), after
        assert pages["wheel"].next_cursor == pages["rocks"].next_cursor, after


@pytest.mark.parametrize("bad", BAD_CURSORS)
def test_a_cursor_the_server_did_not_issue_is_refused_naming_cursor(stores, bad):
    for kind, store in stores.items():
        with pytest.raises(InvalidInputError) as listing:
            store.list_pending(cursor=bad)
        with pytest.raises(InvalidInputError) as dead:
            store.dead_letters(after=bad)
        assert (listing.value.field, dead.value.field) == ("cursor", "cursor"), kind
