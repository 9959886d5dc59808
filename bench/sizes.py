"""Scenario sizes: ``full`` is the issue's, ``quick`` takes about 3 minutes on 2 idle cores
(``make bench``; longer on a busy machine), ``tiny`` is for tests."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Sizes:
    name: str
    # 1 enqueue: windows of about window_timers (capped at window_bytes of payload) per combo
    enqueue_batches: tuple[int, ...] = (1, 100, 1000)
    enqueue_payloads: tuple[int, ...] = (100, 1024, 16384)
    enqueue_window_timers: int = 10_000
    enqueue_window_bytes: int = 32 << 20
    enqueue_windows: int = 5
    enqueue_sync_window_calls: int = 2000  # a window's calls on a system that fsyncs each
    # 2 burst
    burst_timers: int = 1_000_000
    burst_timeout_s: float = 300.0
    # 3 steady
    steady_rate: int = 10_000
    steady_seconds: float = 60.0
    steady_delay_ms: int = 1000
    # 4 cancel
    cancel_timers: int = 1_000_000
    # 5 long delays
    long_timers: int = 1_000_000
    long_days: int = 30
    long_step_ms: int = 600_000
    long_max_slots: int = 60_000_000  # a wheel walks every slot: 30 days at 10 ms is 259M
    long_max_rolls: int = 10_000_000  # and rolls each timer span / roll window times
    # 6 growth: pending target per payload size (4 KB capped by the disk: 20M x 4 KB = 80 GB)
    growth_targets: dict[int, int] = field(
        default_factory=lambda: {200: 20_000_000, 4096: 2_000_000}
    )
    growth_windows: int = 40
    growth_blob_min_bytes: int = 64
    growth_read_scan: int = 200_000
    growth_read_gets: int = 10_000
    growth_payloads: tuple[int, ...] | None = None  # the growth_targets sizes to run (None: all)
    growth_blob: bool = True  # also each size with BlobDB (the RocksDB store)
    growth_at_size: bool = False  # burst and steady on the grown 200 B store (at_size)
    # 7 recovery
    recovery_pending: int = 5_000_000
    # 9 tombstones
    tombstone_deliveries: int = 10_000_000
    tombstone_probe: int = 1000
    batch: int = 1000  # schedule batch when the scenario is not about batch size

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["growth_targets"] = {str(k): v for k, v in self.growth_targets.items()}
        return out


FULL = Sizes("full")

QUICK = Sizes(
    "quick",
    enqueue_window_timers=2000,
    enqueue_window_bytes=4 << 20,
    enqueue_windows=3,
    enqueue_sync_window_calls=200,
    burst_timers=20_000,
    burst_timeout_s=30.0,
    steady_rate=1000,
    steady_seconds=2.0,
    steady_delay_ms=500,
    cancel_timers=20_000,
    long_timers=10_000,
    long_step_ms=6 * 3600 * 1000,
    long_max_slots=3_000_000,
    long_max_rolls=1_000_000,
    growth_targets={200: 100_000, 4096: 20_000},
    growth_windows=10,
    growth_read_scan=20_000,
    growth_read_gets=1000,
    recovery_pending=50_000,
    tombstone_deliveries=100_000,
    tombstone_probe=1000,
)

TINY = Sizes(
    "tiny",
    enqueue_batches=(1, 100),
    enqueue_payloads=(100, 1024),
    enqueue_window_timers=200,
    enqueue_window_bytes=1 << 20,
    enqueue_windows=2,
    enqueue_sync_window_calls=20,
    burst_timers=500,
    burst_timeout_s=20.0,
    steady_rate=200,
    steady_seconds=0.5,
    steady_delay_ms=200,
    cancel_timers=400,
    long_timers=300,
    long_step_ms=24 * 3600 * 1000,
    long_max_slots=3_000_000,
    long_max_rolls=1_000_000,
    growth_targets={200: 2000, 4096: 400},
    growth_windows=2,
    growth_read_scan=500,
    growth_read_gets=50,
    recovery_pending=2000,
    tombstone_deliveries=2000,
    tombstone_probe=100,
)

PRESETS = {s.name: s for s in (FULL, QUICK, TINY)}
