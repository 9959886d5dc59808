"""A scrape is cheap: with 1,000,000 timers pending it iterates nothing in the store.

Asserted on RocksDB's own tickers (``rocksdb.number.db.seek``: iterator seeks;
``rocksdb.number.db.next``: iterator steps; ``rocksdb.number.iter.skip``: keys an
iterator stepped over), never on time. The same probe sees the key scan of
``/v1/stats`` (its due-time buckets), so it would see one in a scrape.
"""

from __future__ import annotations

import pytest

from storage.protocol import NewTimer
from storage.rocks import RocksTimerStore
from tests.api.helpers import T0_MS
from tests.api.test_metrics import scrape

COUNT = 1_000_000
ITERATION = ("rocksdb.number.db.seek", "rocksdb.number.db.next", "rocksdb.number.iter.skip")
HOUR_MS = 3_600_000


def _iteration(store: RocksTimerStore) -> dict[str, int]:
    return {name: store.ticker(name) for name in ITERATION}


@pytest.mark.slow
def test_scrapes_iterate_nothing_with_a_million_pending(fake_api_factory) -> None:
    api = fake_api_factory(
        rocks={"statistics": True},
        housekeeping={"interval_ms": HOUR_MS, "stats_snapshot_interval_ms": HOUR_MS},
    )
    store = api.service.store
    assert isinstance(store, RocksTimerStore)
    for start in range(0, COUNT, 10_000):
        chunk = range(start, start + 10_000)
        store.schedule(
            [NewTimer(f"t{i % 4}", f"{i:07d}", T0_MS + 120_000 + i) for i in chunk], T0_MS
        )
    assert api.client.get("/v1/stats").status_code == 200  # a snapshot: buckets, oldest due

    before = _iteration(store)
    for _ in range(5):
        s = scrape(api)
    assert _iteration(store) == before
    assert sum(s.value("timerstore_pending_timers", topic=f"t{i}") for i in range(4)) == COUNT
    assert s.value("timerstore_pending_due_timers", due="lt_1h") == COUNT
    # the scrape reports the same tickers it is judged by
    assert (
        s.value("timerstore_rocksdb_ticker_total", ticker="rocksdb.number.db.seek")
        == (before["rocksdb.number.db.seek"])
    )

    assert api.client.get("/v1/stats").status_code == 200  # counts keys: the probe sees it
    after = _iteration(store)
    assert after["rocksdb.number.db.next"] - before["rocksdb.number.db.next"] >= COUNT - 1
