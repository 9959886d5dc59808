"""The real stores (RocksDB, RIP-43 wheel) driven through the real Engine."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from app.clock import FakeClock, SystemClock
from app.engine import Engine, EngineSettings
from app.engine.sinks import TopicLogSink
from bench.systems.base import TOPIC, BenchSystem, BenchTimer
from storage.protocol import DueTimer, NewTimer, TimerStore
from storage.rocks import RocksSettings, RocksTimerStore
from storage.wheel import WheelSettings, WheelTimerStore

StoreFactory = Callable[[str], TimerStore]
ROCKS_TICKERS = (
    "rocksdb.number.iter.skip",
    "rocksdb.number.keys.written",
    "rocksdb.bytes.written",
    "rocksdb.wal.bytes",
    "rocksdb.flush.write.bytes",
    "rocksdb.compact.write.bytes",
    "rocksdb.compact.read.bytes",
    "rocksdb.compaction.total.time.cpu_micros",
    "rocksdb.stall.micros",  # writes slowed or stopped (L0 files, pending compaction bytes)
    "rocksdb.blobdb.blob.file.bytes.written",
    "rocksdb.blobdb.blob.file.bytes.read",
)


class RecordingSink(TopicLogSink):
    """The embedded topic-log sink that also remembers which ids it delivered."""

    def __init__(self) -> None:
        self.ids: set[str] = set()

    def deliver(self, batch: Sequence[DueTimer]) -> None:
        self.ids.update(t.id for t in batch)


def rocks_factory(
    *,
    statistics: bool = False,
    blob_min_bytes: int | None = None,
    disable_wal: bool = False,
    sync_writes: bool = False,
) -> StoreFactory:
    def open_rocks(path: str) -> TimerStore:
        settings = RocksSettings(
            path=path,
            statistics=statistics,
            blob_min_bytes=blob_min_bytes,
            disable_wal=disable_wal,
            sync_writes=sync_writes,
        )
        return RocksTimerStore(settings)

    return open_rocks


WHEEL_SLOTS = 7 * 24 * 3600  # RocketMQ's slot count; at 10 ms it spans 100 minutes


def wheel_roll_window_ms(precision_ms: int) -> int:
    """RocketMQ's roll window is 2 of the wheel's 7 days: keep that share of the span."""
    return min(2 * 24 * 3600 * 1000, WHEEL_SLOTS * precision_ms * 2 // 7)


def wheel_factory(precision_ms: int) -> StoreFactory:
    def open_wheel(path: str) -> TimerStore:
        settings = WheelSettings(
            path=path,
            precision_ms=precision_ms,
            slots=WHEEL_SLOTS,
            roll_window_ms=wheel_roll_window_ms(precision_ms),
        )
        return WheelTimerStore(settings)

    return open_wheel


class EngineSystem(BenchSystem):
    batch_native = True
    sim_clock = True
    durable = True

    def __init__(
        self,
        name: str,
        workdir: str,
        factory: StoreFactory,
        *,
        simulated: bool,
        record_ids: bool = False,
        lateness_window: int = 1_000_000,
        tick_ms: int = 10,
    ) -> None:
        super().__init__(name, workdir)
        self.factory = factory
        self.store = factory(workdir)
        self.clock: FakeClock | SystemClock = FakeClock() if simulated else SystemClock()
        self.sink = RecordingSink() if record_ids else TopicLogSink()
        settings = EngineSettings(tick_ms=tick_ms, lateness_window=lateness_window)
        self.engine = Engine(self.store, self.clock, settings, self.sink)
        self._started = False

    def _schedule(self, timers: Sequence[BenchTimer], now_ms: int) -> None:
        self.store.schedule(
            [NewTimer(TOPIC, t.id, t.deliver_at_ms, t.payload) for t in timers], now_ms
        )

    def cancel(self, ids: Sequence[str]) -> int:
        results = self.store.cancel([(TOPIC, i) for i in ids])
        return sum(1 for r in results if r.outcome == "removed")

    def start(self) -> None:
        self.engine.start()
        self._started = True

    def stop(self) -> None:
        if self._started:
            self.engine.stop()
            self._started = False

    def run_due(self, now_ms: int) -> int:
        if isinstance(self.clock, FakeClock):
            self.clock.set(now_ms)
        return self.engine.run_once(now_ms)

    def delivered(self) -> int:
        return self.engine.dispatcher.delivered

    def lateness(self) -> dict[str, Any]:
        s = self.engine.lateness.summary()
        return {"p50_ms": s.p50_ms, "p99_ms": s.p99_ms, "max_ms": s.max_ms, "early": s.early}

    def delivered_ids(self) -> set[str]:
        if not isinstance(self.sink, RecordingSink):
            raise RuntimeError("open the system with record_ids=True")
        return self.sink.ids

    def pending(self) -> int:
        return self.store.stats().pending

    def ticker(self, name: str) -> int | None:
        read = getattr(self.store, "ticker", None)
        return None if read is None else int(read(name))

    def counters(self) -> dict[str, Any]:
        out: dict[str, Any] = {"stats": _plain(self.store.stats())}
        if isinstance(self.store, RocksTimerStore):
            # RocksDB's own properties, kept without statistics (which cost every write):
            # whether writes stalled since the open, and the compaction left to do
            rocks = self.store.rocksdb_metrics()
            out["rocksdb"] = {
                "write_stall_s": rocks.write_stall_seconds,
                "pending_compaction_bytes": rocks.pending_compaction_bytes,
            }
            if self.store.settings.statistics:
                out["tickers"] = {n: self.store.ticker(n) for n in ROCKS_TICKERS}
        extra: Any = getattr(self.store, "counters", None)
        if hasattr(extra, "snapshot"):
            extra = extra.snapshot()
        elif callable(extra):
            extra = extra()
        if extra is not None:
            out["store"] = _plain(extra)
        return out

    def reopen(self) -> float:
        """Close and reopen the store (a restart); return the seconds until it is ready."""
        self.stop()
        self.store.close()
        started = time.perf_counter()
        self.store = self.factory(self.workdir)
        self.store.stats()
        ready_s = time.perf_counter() - started
        settings = self.engine.settings
        self.engine = Engine(self.store, self.clock, settings, self.sink)
        return ready_s

    def close(self) -> None:
        self.stop()
        self.store.close()


def _plain(value: Any) -> Any:
    return msgspec.to_builtins(value)
