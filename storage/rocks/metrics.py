"""RocksDB's own numbers for ``/metrics``: properties of every family and statistics tickers.

Properties are kept by RocksDB in memory (reading one iterates nothing). The write stall
time comes from the ``rocksdb.dbstats`` text (``Cumulative stall: H:M:S``), which RocksDB
keeps with or without statistics; tickers exist only with ``RocksSettings.statistics``.
"""

from __future__ import annotations

import re

import msgspec

from storage.rocks.db import RocksHandles

TICKERS = (
    "rocksdb.number.db.seek",
    "rocksdb.number.db.next",
    "rocksdb.number.iter.skip",
    "rocksdb.stall.micros",
    "rocksdb.block.cache.data.hit",
    "rocksdb.block.cache.data.miss",
    "rocksdb.bytes.written",
    "rocksdb.bytes.read",
    "rocksdb.compact.read.bytes",
    "rocksdb.compact.write.bytes",
)
STALL_LINE = re.compile(r"Cumulative stall: (\d+):(\d+):([\d.]+) H:M:S")


class RocksMetrics(msgspec.Struct, frozen=True):
    live_sst_bytes: int
    pending_compaction_bytes: int
    memtable_bytes: int
    table_readers_bytes: int  # index and filter blocks of open SST files (not in the cache)
    block_cache_usage_bytes: int
    block_cache_capacity_bytes: int
    write_stall_seconds: float
    tickers: dict[str, int]  # empty unless statistics are enabled


def _family_sum(h: RocksHandles, prop: str) -> int:
    return sum(cf.property_int_value(prop) or 0 for cf in h.cfs.values())


def stall_seconds(dbstats: str) -> float:
    match = STALL_LINE.search(dbstats)
    if match is None:
        return 0.0
    hours, minutes, seconds = match.groups()
    return int(hours) * 3600 + int(minutes) * 60 + float(seconds)


def tickers(statistics_text: str) -> dict[str, int]:
    found: dict[str, int] = {}
    for line in statistics_text.splitlines():
        name, _, rest = line.partition(" COUNT : ")
        if name in TICKERS and rest:
            found[name] = int(rest.split()[0])
    return found


def read_metrics(h: RocksHandles, capacity_bytes: int) -> RocksMetrics:
    # the block cache is the one every named family shares; the default family (what
    # ``h.db`` answers for) has RocksDB's own small cache, which holds none of our blocks
    shared = h.cfs["timers"]
    return RocksMetrics(
        live_sst_bytes=_family_sum(h, "rocksdb.live-sst-files-size"),
        pending_compaction_bytes=_family_sum(h, "rocksdb.estimate-pending-compaction-bytes"),
        memtable_bytes=_family_sum(h, "rocksdb.cur-size-all-mem-tables"),
        table_readers_bytes=_family_sum(h, "rocksdb.estimate-table-readers-mem"),
        block_cache_usage_bytes=shared.property_int_value("rocksdb.block-cache-usage") or 0,
        block_cache_capacity_bytes=(
            shared.property_int_value("rocksdb.block-cache-capacity") or capacity_bytes
        ),
        write_stall_seconds=stall_seconds(h.db.property_value("rocksdb.dbstats") or ""),
        tickers=tickers(h.options.get_statistics() or ""),
    )
