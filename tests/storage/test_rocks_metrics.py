"""RocksDB's numbers behind ``/metrics`` move with the store's work, on a real RocksDB.

Each value is read from the store after the work that must move it: writes fill the
memtables, a flush turns them into live SST bytes, reads of flushed keys fill the shared
block cache (not the default family's own small cache, which holds none of our blocks),
and the iterator tickers count a listing. The write stall parser is checked against the
``rocksdb.dbstats`` text this RocksDB writes, so a changed format cannot read as 0 unseen.
"""

from __future__ import annotations

import random

import rocksdict as rd

from storage.protocol import NewTimer
from storage.rocks import RocksSettings, RocksTimerStore
from storage.rocks.metrics import STALL_LINE, stall_seconds

NOW_MS = 1_700_000_000_000


def _fill(store: RocksTimerStore, count: int) -> None:
    noise = random.Random(7)  # payloads that do not compress away
    timers = [
        NewTimer("a", f"{i:06d}", NOW_MS + 60_000 + i, noise.randbytes(200)) for i in range(count)
    ]
    store.schedule(timers, NOW_MS)


def test_properties_move_with_writes_flushes_and_reads(rocks_store: RocksTimerStore) -> None:
    empty = rocks_store.rocksdb_metrics()
    assert empty.live_sst_bytes == 0
    assert empty.block_cache_capacity_bytes == rocks_store.settings.block_cache_bytes

    _fill(rocks_store, 5000)
    written = rocks_store.rocksdb_metrics()
    assert written.memtable_bytes > empty.memtable_bytes + 5000 * 200
    assert written.tickers["rocksdb.bytes.written"] > 5000 * 200

    rocks_store.flush()
    flushed = rocks_store.rocksdb_metrics()
    assert flushed.live_sst_bytes > 5000 * 200 // 2  # random payloads barely compress
    assert flushed.memtable_bytes < written.memtable_bytes
    assert empty.table_readers_bytes == 0 < flushed.table_readers_bytes  # the new SST's index

    page = rocks_store.list_pending(limit=2000)
    assert len(page.timers) == 2000
    read = rocks_store.rocksdb_metrics()
    assert read.block_cache_usage_bytes > flushed.block_cache_usage_bytes + 100_000
    assert read.tickers["rocksdb.number.db.seek"] > flushed.tickers["rocksdb.number.db.seek"]
    assert read.tickers["rocksdb.number.db.next"] >= flushed.tickers["rocksdb.number.db.next"]


def test_index_and_filter_blocks_move_into_the_block_cache_when_asked(tmp_path) -> None:
    """Beside the cache they grow with the pending timers; in it they stay within its size."""
    readers, cached = {}, {}
    for inside in (False, True):
        store = RocksTimerStore(
            RocksSettings(str(tmp_path / str(inside)), cache_index_and_filter_blocks=inside)
        )
        try:
            _fill(store, 20_000)
            store.flush()
            metrics = store.rocksdb_metrics()
            readers[inside], cached[inside] = (
                metrics.table_readers_bytes,
                metrics.block_cache_usage_bytes,
            )
        finally:
            store.close()
    assert readers[False] > 20_000 * 2  # a bloom filter alone is 1.25 bytes a key a family
    assert readers[True] < readers[False] // 4
    assert cached[True] > cached[False] + readers[False] // 2  # what moved is in the cache


def test_the_stall_line_of_this_rocksdb_is_parsed(rocks_store: RocksTimerStore) -> None:
    _fill(rocks_store, 10)
    dbstats = rocks_store.handles.db.property_value("rocksdb.dbstats") or ""
    assert STALL_LINE.search(dbstats) is not None, dbstats
    assert rocks_store.rocksdb_metrics().write_stall_seconds == stall_seconds(dbstats) == 0.0
    line = "Cumulative stall: 01:02:3.500 H:M:S, 12.0 percent"
    assert stall_seconds(line) == 3723.5
    assert stall_seconds("no such line") == 0.0


def _readers_bytes(store: RocksTimerStore, family: str) -> int:
    cf = store.handles.cfs[family]
    return cf.property_int_value("rocksdb.estimate-table-readers-mem") or 0


def test_timers_at_the_bottom_level_keep_a_small_index_and_no_filter(tmp_path) -> None:
    """``timers`` is read by ranges and by gets of keys ``ids`` found, so its bottommost
    level has no bloom filter and 16 KiB blocks: its index and filters take 0.4 bytes a
    timer there (4 KiB blocks with a filter took 2.6), while ``ids``, whose
    schedule-time lookups mostly miss, keeps its filter (1.25 bytes a key on its own).
    Gets of pending, missing and cancelled timers still answer right from those files."""
    store = RocksTimerStore(RocksSettings(str(tmp_path / "r")))
    try:
        _fill(store, 20_000)
        store.cancel([("a", "000007")])
        store.flush()
        to_the_bottom = rd.CompactOptions()  # rewritten there, not moved down as they are
        to_the_bottom.set_bottommost_level_compaction(rd.BottommostLevelCompaction.force())
        for family in ("timers", "ids"):
            store.handles.cfs[family].compact_range(None, None, to_the_bottom)
        assert _readers_bytes(store, "timers") < 20_000 * 3 // 4
        assert _readers_bytes(store, "ids") > 20_000 * 5 // 4
        assert store.get("a", "019999").deliver_at_ms == NOW_MS + 60_000 + 19_999
        assert store.get("a", "020000") is None
        assert store.get("a", "000007") is None
        assert len(store.list_pending(limit=20_000).timers) == 19_999
    finally:
        store.close()
