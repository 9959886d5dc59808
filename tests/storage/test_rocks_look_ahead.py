"""An empty due scan notes the first key ahead (``storage.rocks.look_ahead``), and the
scans after it answer "nothing" without reading until that key is due. These tests pin
that the note is dropped by everything that can add a key below it, on a real RocksDB."""

from __future__ import annotations

import pytest
import rocksdict as rd

from storage.protocol import LOG_SINK, NewTimer
from storage.rocks import RocksSettings, RocksTimerStore
from storage.rocks import keys as layout
from storage.rocks.look_ahead import MAX_SKIPPED_KEYS, LookAhead

NOW = 1_700_000_000_000
SKIPS = "rocksdb.number.iter.skip"  # internal keys an iterator stepped over


@pytest.fixture
def store(tmp_path):
    s = RocksTimerStore(RocksSettings(str(tmp_path / "rocks")))
    yield s
    s.close()


def test_the_note_holds_until_a_write_a_lower_cursor_or_its_key_falls_due(tmp_path):
    db = rd.Rdict(str(tmp_path / "db"))
    try:
        ahead = LookAhead()
        db[layout.u64(NOW + 100) + b"o\0a"] = b"v"
        ahead.note(db, db, layout.u64(NOW))
        assert ahead.nothing_below(db, layout.u64(NOW), layout.u64(NOW + 100))
        assert ahead.nothing_below(db, layout.u64(NOW + 50), layout.u64(NOW + 100))
        assert not ahead.nothing_below(db, layout.u64(NOW), layout.u64(NOW + 101))  # due
        assert not ahead.nothing_below(db, layout.u64(NOW - 1), layout.u64(NOW + 1))  # rewound
        db[layout.u64(1)] = b"x"  # any write, even below the cursor: the sequence moved
        assert not ahead.nothing_below(db, layout.u64(NOW), layout.u64(NOW + 1))
        ahead.note(db, db, layout.u64(NOW))
        ahead.forget()
        assert not ahead.nothing_below(db, layout.u64(NOW), layout.u64(NOW + 1))
        ahead.note(db, db, layout.u64(NOW + 101))  # no key from here on: nothing is ever due
        assert ahead.nothing_below(db, layout.u64(NOW + 101), layout.u64(2**62))
    finally:
        db.close()


def test_a_timer_scheduled_after_an_empty_scan_is_due_at_its_time(store):
    store.schedule([NewTimer("o", "later", NOW + 10_000)], NOW)
    assert store.due(NOW, 10) == []  # notes "later" as the next key
    assert store.due(NOW + 5, 10) == []
    store.schedule([NewTimer("o", "sooner", NOW + 20)], NOW + 5)
    assert store.due(NOW + 19, 10) == []
    assert [t.id for t in store.due(NOW + 20, 10)] == ["sooner"]
    assert [t.id for t in store.due(NOW + 10_000, 10)] == ["later"]


def test_a_released_batch_is_due_again_after_empty_scans(store):
    store.schedule([NewTimer("o", "a", NOW)], NOW)
    batch = store.due(NOW, 10)
    assert store.due(NOW + 1, 10) == [] and store.due(NOW + 2, 10) == []
    store.release(batch)
    assert [t.id for t in store.due(NOW + 3, 10)] == ["a"]


def test_a_retry_sooner_than_the_next_key_is_due_at_its_time(store):
    store.schedule([NewTimer("o", "a", NOW), NewTimer("o", "far", NOW + 60_000)], NOW)
    batch = store.due(NOW, 10)
    assert store.due(NOW + 1, 10) == []  # notes "far"
    store.retry_later(batch, NOW + 50, "boom")
    assert store.due(NOW + 49, 10) == []
    assert [t.id for t in store.due(NOW + 50, 10)] == ["a"]


def test_a_clock_stepped_back_still_finds_what_is_scheduled_then(store):
    store.schedule([NewTimer("o", "far", NOW + 60_000)], NOW)
    assert store.due(NOW + 1000, 10) == []
    store.schedule([NewTimer("o", "back", NOW - 4000)], NOW - 5000)  # a clock 5 s behind
    assert [t.id for t in store.due(NOW - 4000, 10)] == ["back"]


def test_a_committed_batch_and_empty_scans_leave_the_next_timer_due(store):
    store.schedule([NewTimer("o", f"t{i}", NOW + i * 100) for i in range(5)], NOW)
    for i in range(5):
        assert store.due(NOW + i * 100 - 1, 10) == []
        due = store.due(NOW + i * 100, 10)
        assert [t.id for t in due] == [f"t{i}"]
        store.commit_delivered(due, NOW + i * 100, sink=LOG_SINK)
    assert store.stats().delivered == 5 and store.stats().pending == 0


def test_a_note_does_not_walk_the_tombstones_of_cancelled_timers(tmp_path):
    """5,000 cancelled timers ahead of the cursor, then a write before each empty scan:
    each scan's note gives up after MAX_SKIPPED_KEYS deleted keys instead of walking them
    all (RocksDB's own count of the internal keys its iterators stepped over), and the
    live timers behind and before them are still due at their times."""
    store = RocksTimerStore(RocksSettings(str(tmp_path / "rocks"), statistics=True))
    try:
        cancelled = [NewTimer("o", f"c{i}", NOW + 60_000 + i) for i in range(5000)]
        store.schedule([*cancelled, NewTimer("o", "behind", NOW + 120_000)], NOW)
        store.cancel([("o", t.id) for t in cancelled])
        for tick in range(1, 6):
            store.schedule([NewTimer("w", f"w{tick}", NOW + 30_000 + tick)], NOW)
            skipped = store.ticker(SKIPS)
            assert store.due(NOW + tick, 10) == []
            assert store.ticker(SKIPS) - skipped <= MAX_SKIPPED_KEYS + 10 < len(cancelled) // 2
        due = store.due(NOW + 30_005, 10)
        assert [t.id for t in due] == [f"w{tick}" for tick in range(1, 6)]
        store.commit_delivered(due, NOW + 30_005, sink=LOG_SINK)
        assert store.due(NOW + 119_999, 10) == []
        assert [t.id for t in store.due(NOW + 120_000, 10)] == ["behind"]
    finally:
        store.close()
