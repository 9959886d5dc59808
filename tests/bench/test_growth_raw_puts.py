"""The growth scenario's yardstick: the store's timers grown again as raw RocksDB puts in
the same run, to tell the store's own fall from RocksDB's."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from bench.claims import growth_slowdown
from bench.scenarios import growth
from bench.scenarios.common import Context
from bench.sizes import TINY
from bench.systems import select_specs
from bench.systems.base import TOPIC, BenchTimer
from bench.systems.raw_puts import RawPutsSystem, open_raw
from storage.protocol import NewTimer
from storage.rocks import RocksSettings, RocksTimerStore

NOW_MS = 1_700_000_000_000


def test_the_raw_puts_are_the_stores_own_timers_keys_and_records(tmp_path: Path) -> None:
    """The yardstick writes byte for byte what the store writes into ``timers``: a cheaper
    record or a shorter key would flatter RocksDB against the store."""
    timers = [BenchTimer(f"t{i}", NOW_MS + 5000 + i * 7919, bytes([i]) * 200) for i in range(50)]
    store = RocksTimerStore(RocksSettings(path=str(tmp_path / "store")))
    try:
        store.schedule([NewTimer(TOPIC, t.id, t.deliver_at_ms, t.payload) for t in timers], NOW_MS)
        stored = list(store.handles.cfs["timers"].items())
    finally:
        store.close()
    raw = RawPutsSystem("raw", str(tmp_path / "raw"))
    raw.schedule(timers, NOW_MS)
    assert raw.pending() == 50
    raw.close()
    db, _options = open_raw(str(tmp_path / "raw" / "db"))
    try:
        written = list(db.items())
    finally:
        db.close()
    assert len(stored) == 50
    assert written == stored


def test_a_rocks_growth_grows_the_same_timers_as_raw_puts_after_the_store(
    tmp_path: Path,
) -> None:
    (rocks,) = select_specs(["rocks"])
    sizes = dataclasses.replace(
        TINY, growth_targets={200: 6000}, growth_windows=6, growth_payloads=(200,)
    )
    seen: list[float] = []
    figures = growth.run(rocks, Context(sizes, str(tmp_path), seen.append))
    assert "raw_puts" not in figures["variants"]["p200_blob"]  # BlobDB is not the yardstick's
    variant = figures["variants"]["p200"]
    raw = variant["raw_puts"]
    assert raw["pending_end"] == variant["pending_end"] == 6000
    assert len(raw["rates"]) == 6 and all(rate > 0 for rate in raw["rates"])
    assert variant["end_vs_raw_end"] == pytest.approx(variant["rate_end"] / raw["rate_end"])
    lines = (tmp_path / "raw-p200.windows.jsonl").read_text().splitlines()
    assert [json.loads(line)["rate"] for line in lines] == raw["rates"]
    assert set(raw["counters"]["tickers"]) >= {
        "rocksdb.compact.write.bytes",
        "rocksdb.stall.micros",
    }
    assert raw["bytes_on_disk"] > 6000 * 200
    assert not (tmp_path / "raw-p200").exists()  # its disk is not the scenario's
    # its writes are left out of the store's: the runner subtracts them
    assert figures["io_write_bytes_excluded"] == raw["io_write_bytes"]
    # the bar runs over the store's windows, the raw puts', then BlobDB's, and no further
    assert seen == sorted(seen) and len(seen) == 18
    assert [seen[5], seen[11], seen[17]] == pytest.approx([1 / 3, 2 / 3, 1])


def test_only_the_rocksdb_store_is_grown_again_as_raw_puts(tmp_path: Path) -> None:
    (heap,) = select_specs(["heap"])
    sizes = dataclasses.replace(TINY, growth_targets={200: 2000}, growth_payloads=(200,))
    figures = growth.run(heap, Context(sizes, str(tmp_path)))
    assert "raw_puts" not in figures["variants"]["p200"]
    assert "io_write_bytes_excluded" not in figures


def test_claim_3_gives_raw_puts_fall_beside_the_stores() -> None:
    """Whether writes slow down as the store grows is judged on the store's own ratio;
    raw puts' ratio in the same run stands beside it, to tell the store's fall from
    RocksDB's."""
    store = {
        "rate_start": 170_052.0,
        "rate_end": 130_232.0,
        "end_vs_start": 0.766,
        "made_end_vs_start": 0.85,
        "end_vs_start_same_core": 0.766 / 0.85,
    }
    raw = {"rate_start": 310_564.0, "rate_end": 255_588.0, "end_vs_start": 0.823}
    variant = {**store, "pending_end": 100_000_000, "raw_puts": {**raw, "pending_end": 100_000_000}}
    figures = {"variants": {"p200": variant}}
    results = {
        "scenarios": {"growth": {"systems": {"rocks": {"status": "ok", "figures": figures}}}}
    }
    claim = growth_slowdown(results)
    assert claim["verdict"].startswith("refuted")  # 0.77 >= 0.7, whatever raw puts did
    assert claim["numbers"] == [
        "p200: 170,052/s at 0, 130,232/s at 100,000,000 (end/start 0.77; the core ran "
        "identical work at 0.85 of its start speed: 0.90 at the start's speed)",
        "raw RocksDB puts of the same timers: 310,564/s at 0, 255,588/s at 100,000,000 "
        "(end/start 0.82)",
    ]
