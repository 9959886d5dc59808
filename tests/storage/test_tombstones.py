"""The tombstone trap: a million delivered-and-deleted timers must not slow the next scan.

Asserted on RocksDB's own ticker ``rocksdb.number.iter.skip`` (internal keys, such as
tombstones, an iterator stepped over), never on wall time.
"""

from __future__ import annotations

import pytest

from app.engine import Engine, EngineSettings
from storage.protocol import NewTimer
from storage.rocks import RocksSettings, RocksTimerStore

SKIPS = "rocksdb.number.iter.skip"
COUNT = 1_000_000
NOW = 1_700_000_000_000


def empty_scan_skips(store: RocksTimerStore, now_ms: int) -> int:
    before = store.ticker(SKIPS)
    assert store.due(now_ms, 1000) == []
    return store.ticker(SKIPS) - before


@pytest.mark.slow
def test_a_million_deliveries_do_not_slow_the_next_empty_due_scan(tmp_path, clock):
    # Without automatic compaction every tombstone stays until housekeeping compacts it:
    # the worst case, and deterministic (with it, RocksDB may drop some of them earlier).
    settings = RocksSettings(
        str(tmp_path / "rocks"),
        statistics=True,
        disable_auto_compactions=True,
        write_buffer_bytes=256 << 20,
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
    assert empty_scan_skips(store, done_ms + 1000) < 100  # the cursor starts past them
    store.close()

    # The trap is real: a store restarted at an old watermark wades through every tombstone.
    store = RocksTimerStore(settings)
    assert empty_scan_skips(store, done_ms + 1000) >= COUNT
    # Housekeeping advances the watermark, range-deletes and compacts below it ...
    report = store.housekeep(done_ms + 2000)
    assert report.watermark_advanced and report.watermark_ms > done_ms
    store.close()
    # ... so the next restart starts past them too.
    store = RocksTimerStore(settings)
    try:
        assert empty_scan_skips(store, done_ms + 3000) < 100
        assert store.stats().delivered == COUNT and store.stats().pending == 0
    finally:
        store.close()
