"""The tombstone trap: a million delivered timers must not slow the next scan or read.

Deliveries remove their timers with one range delete per committed batch. Asserted on
RocksDB's own tickers (``rocksdb.number.iter.skip``: internal keys an iterator stepped
over; data-block cache hits + misses: blocks a read touched) and on the SST table
properties, never on wall time. Without automatic compaction every deleted key stays in
the SST files until housekeeping compacts it: the worst case, and deterministic.
"""

from __future__ import annotations

import re

import pytest

from app.engine import Engine, EngineSettings
from storage.protocol import NewTimer
from storage.rocks import RocksSettings, RocksTimerStore

SKIPS = "rocksdb.number.iter.skip"
BLOCKS = ("rocksdb.block.cache.data.miss", "rocksdb.block.cache.data.hit")
COUNT = 1_000_000
NOW = 1_700_000_000_000
PROBES = 100


def _blocks(store: RocksTimerStore) -> int:
    return sum(store.ticker(name) for name in BLOCKS)


def empty_scan_cost(store: RocksTimerStore, now_ms: int) -> tuple[int, int]:
    """(keys skipped, data blocks touched) by a due scan that finds nothing."""
    skips, blocks = store.ticker(SKIPS), _blocks(store)
    assert store.due(now_ms, 1000) == []
    return store.ticker(SKIPS) - skips, _blocks(store) - blocks


def point_and_log_read_blocks(store: RocksTimerStore) -> int:
    """Data blocks touched by PROBES identity reads and one page of the topic log."""
    blocks = _blocks(store)
    for i in range(0, COUNT, COUNT // PROBES):
        view = store.get("t", f"{i:07d}")
        assert view is not None and view.state == "delivered"
    assert [m.offset for m in store.read_log("t", COUNT // 2, 10)] == list(
        range(COUNT // 2, COUNT // 2 + 10)
    )
    return _blocks(store) - blocks


def timers_family_sst(store: RocksTimerStore) -> dict[str, int]:
    """Entry, point-deletion and range-deletion counts of the timers family's SST files."""
    props = store.handles.cfs["timers"].property_value("rocksdb.aggregated-table-properties")
    counts = dict(re.findall(r"# (entries|deletions|range deletions)=(\d+)", props or ""))
    return {name: int(value) for name, value in counts.items()}


def assert_flat(store: RocksTimerStore, now_ms: int) -> None:
    skips, blocks = empty_scan_cost(store, now_ms)
    assert skips < 100 and blocks < 10, (skips, blocks)
    # a delivered identity read touches four blocks at most, however many deliveries came
    # before: its ids entry, its timer key (gone under a range tombstone), its ranges entry
    # and the journal page (format 3, storage.rocks.ranges); plus the log page
    assert point_and_log_read_blocks(store) <= 4 * PROBES + 10


@pytest.mark.slow
def test_a_million_range_deleted_deliveries_leave_scans_and_reads_flat(tmp_path, clock):
    settings = RocksSettings(
        str(tmp_path / "rocks"),
        statistics=True,
        disable_auto_compactions=True,
        write_buffer_bytes=256 << 20,
        timers_write_buffer_bytes=256 << 20,
        write_buffer_total_bytes=1 << 30,
    )
    store = RocksTimerStore(settings)
    for start in range(0, COUNT, 5000):
        store.schedule(
            [NewTimer("t", f"{i:07d}", NOW + i // 100) for i in range(start, start + 5000)], NOW
        )
    store.flush()  # the timers reach SST files, so their deletes are real tombstones
    engine = Engine(store, clock, EngineSettings(scan_batch=5000, queue_capacity=50_000))
    done_ms = NOW + COUNT // 100
    assert engine.run_once(done_ms) == COUNT
    store.flush()
    sst = timers_family_sst(store)
    # every delivered key is still in the files, covered by a few range tombstones
    assert sst["entries"] >= COUNT and sst["range deletions"] >= 1, sst
    ranges = sst["range deletions"]
    assert ranges <= COUNT // 5000 and sst["deletions"] <= ranges, sst  # no point deletes
    assert_flat(store, done_ms + 1000)  # the scan cursor starts past the deleted range
    store.close()

    # A restart at the old watermark scans from the start of the tombstoned range. With point
    # deletes that first scan stepped over all COUNT tombstones; with range deletes it skips
    # no key and touches at most one data block per range tombstone (one per committed
    # batch), and the scan after it is flat again.
    store = RocksTimerStore(settings)
    skips, blocks = empty_scan_cost(store, done_ms + 1000)
    assert skips < 100 and blocks <= ranges + 10, (skips, blocks, ranges)
    assert_flat(store, done_ms + 1000)
    # Housekeeping advances the watermark and compacts below it: the keys are gone.
    report = store.housekeep(done_ms + 2000)
    assert report.watermark_advanced and report.watermark_ms > done_ms
    assert timers_family_sst(store).get("entries", 0) == 0
    store.close()
    store = RocksTimerStore(settings)
    try:
        assert_flat(store, done_ms + 3000)
        assert store.stats().delivered == COUNT and store.stats().pending == 0
    finally:
        store.close()
