"""A directory whose dead_lettered count was inflated (before 2026-11-24 an identity
dead-lettered twice counted twice) is recounted from its entries at the first open."""

from __future__ import annotations

from storage.protocol import NewTimer
from storage.rocks import RocksSettings, RocksTimerStore
from storage.rocks.counters import DEAD_LETTERS_COUNTED_KEY, TOTAL_KEY_PREFIX
from storage.rocks.keys import u64

NOW = 1_700_000_000_000


def test_an_inflated_dead_letter_count_is_repaired_once_at_open(tmp_path):
    settings = RocksSettings(str(tmp_path / "rocks"))
    store = RocksTimerStore(settings)
    store.schedule([NewTimer("t", "x", NOW), NewTimer("t", "y", NOW)], NOW)
    store.dead_letter(store.due(NOW, 10), NOW, "the sink is down")
    assert store.stats().dead_lettered == 2
    meta = store.handles.cfs["meta"]
    meta[TOTAL_KEY_PREFIX + b"dead_lettered"] = u64(5)  # as the old code could leave it
    del meta[DEAD_LETTERS_COUNTED_KEY]  # a directory the old code wrote
    del meta  # a live family handle keeps RocksDB's LOCK
    store.close()

    store = RocksTimerStore(settings)
    try:
        assert store.stats().dead_lettered == 2  # the entries, not the old count
        assert store.purge_dead_letters() == 2
        assert store.stats().dead_lettered == 0
    finally:
        store.close()
    store = RocksTimerStore(settings)  # counted once: the next open keeps the count
    try:
        assert store.stats().dead_lettered == 0
        assert store.handles.cfs["meta"].get(DEAD_LETTERS_COUNTED_KEY) == u64(1)
    finally:
        store.close()
