"""Measuring helpers: percentiles, window statistics, RSS sampling, disk I/O, machine info."""

from __future__ import annotations

import os
import platform
import statistics
import threading
import time
from collections.abc import Iterable
from importlib import metadata
from typing import Any

import psutil

from app.metrics import percentile


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def lateness_summary(values: Iterable[int], early: int) -> dict[str, Any]:
    ordered = sorted(values)
    if not ordered:
        return {"p50_ms": None, "p99_ms": None, "max_ms": None, "early": early}
    return {
        "p50_ms": percentile(ordered, 0.5),
        "p99_ms": percentile(ordered, 0.99),
        "max_ms": ordered[-1],
        "early": early,
    }


def window_stats(rates: list[float]) -> dict[str, Any]:
    """Median, min and max of per-window rates (how noisy a throughput figure was)."""
    if not rates:
        return {"median": None, "min": None, "max": None, "windows": 0}
    return {
        "median": statistics.median(rates),
        "min": min(rates),
        "max": max(rates),
        "windows": len(rates),
    }


def rss_bytes() -> int:
    return int(psutil.Process().memory_info().rss)


def io_write_bytes() -> int:
    """Bytes this process (all threads, RocksDB's included) caused to be written to storage."""
    try:
        return int(psutil.Process().io_counters().write_bytes)
    except (AttributeError, psutil.Error):  # not available on this platform
        return 0


class RssSampler:
    """Samples RSS in a background thread; ``peak`` is the highest value seen."""

    def __init__(self, interval_s: float = 0.05) -> None:
        self.interval_s = interval_s
        self.base = rss_bytes()
        self.peak = self.base
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-rss", daemon=True)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_bytes())

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.peak = max(self.peak, rss_bytes())


def machine_info() -> dict[str, Any]:
    freq = psutil.cpu_freq()
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "processor": platform.processor() or platform.machine(),
        "cpus_logical": psutil.cpu_count(),
        "cpus_physical": psutil.cpu_count(logical=False),
        "cpu_mhz": None if freq is None else freq.current,
        "memory_bytes": psutil.virtual_memory().total,
        "load_avg": list(os.getloadavg()),
    }


def versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for dist in ("timerstore", "rocksdict", "msgspec", "APScheduler", "SQLAlchemy", "psutil"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out
