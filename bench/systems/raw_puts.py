"""Plain RocksDB puts of the store's own keys and records: the yardstick.

The single schedule and the burst are judged against as many plain ``WriteBatch`` puts
in the same run (``bench.core_throughput``, ``bench.scenarios.burst``); this is the same
yardstick as a ``BenchSystem``, so the growth scenario can grow it beside the store. One
family and RocksDB's default options, WAL on and no fsync (as the store); no ``ids``
family, no duplicate check, no counters: what a write costs RocksDB itself at a size.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import rocksdict as rd

from bench.systems.base import TOPIC, BenchSystem, BenchTimer
from storage import records
from storage.rocks import keys as layout
from storage.rocks.db import read_ticker

RAW_TICKERS = (
    "rocksdb.flush.write.bytes",
    "rocksdb.compact.write.bytes",
    "rocksdb.compaction.total.time.cpu_micros",
    "rocksdb.stall.micros",
)


def raw_pair(
    topic: str, timer_id: str, deliver_at_ms: int, payload: bytes, created_at_ms: int
) -> tuple[bytes, bytes]:
    """The ``timers`` key and encoded record the store writes for one timer."""
    return (
        layout.timer_key(deliver_at_ms, topic.encode(), timer_id.encode()),
        records.encode_new_timer(payload, {}, created_at_ms, deliver_at_ms, False),
    )


def open_raw(path: str, statistics: bool = False) -> tuple[rd.Rdict, rd.Options]:
    """A RocksDB database at ``path`` with the binding's defaults (and its options, through
    which its statistics tickers are read)."""
    options = rd.Options(raw_mode=True)
    options.create_if_missing(True)
    if statistics:
        options.enable_statistics()
    return rd.Rdict(path, options), options


def write_pairs(db: rd.Rdict, pairs: Sequence[tuple[bytes, bytes]]) -> None:
    """The pairs as one WriteBatch, written at once."""
    batch = rd.WriteBatch(raw_mode=True)
    for key, value in pairs:
        batch.put(key, value)
    db.write(batch)


class RawPutsSystem(BenchSystem):
    """Schedules by writing each batch of timers as one WriteBatch; nothing else."""

    sim_clock = True
    durable = True
    batch_native = True

    def __init__(self, name: str, workdir: str, *, statistics: bool = False) -> None:
        super().__init__(name, workdir)
        self._db, self._options = open_raw(os.path.join(workdir, "db"), statistics)
        self._statistics = statistics
        self._pending = 0

    def _schedule(self, timers: Sequence[BenchTimer], now_ms: int) -> None:
        self.write(self.encode(timers, now_ms))

    def encode(self, timers: Sequence[BenchTimer], now_ms: int) -> list[tuple[bytes, bytes]]:
        """The store's key and record of each timer: made before the puts are timed, as
        everywhere the yardstick is measured (``bench.core_throughput._write_timed``)."""
        return [raw_pair(TOPIC, t.id, t.deliver_at_ms, t.payload, now_ms) for t in timers]

    def write(self, pairs: Sequence[tuple[bytes, bytes]]) -> None:
        """The pairs as one WriteBatch: the raw puts themselves."""
        write_pairs(self._db, pairs)
        self._pending += len(pairs)

    def pending(self) -> int:
        return self._pending

    def counters(self) -> dict[str, Any]:
        """What flush and compaction wrote and spent, and how long writes stalled."""
        if not self._statistics:
            return {}
        return {"tickers": {name: read_ticker(self._options, name) for name in RAW_TICKERS}}

    def close(self) -> None:
        self._db.close()
