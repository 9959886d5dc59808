"""Measuring helpers: percentiles, window statistics, RSS sampling, disk I/O, machine info."""

from __future__ import annotations

import os
import platform
import statistics
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
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


TASKS_DIR = "/proc/self/task"  # Linux: one directory per thread of this process


@dataclass(frozen=True)
class ThreadClock:
    """This process's threads at one instant: each thread's name and CPU seconds by its
    id (RocksDB names its compaction threads ``rocksdb:low`` and its flush thread
    ``rocksdb:high``), and the seconds the calling thread has spent runnable but waiting
    for a core."""

    at_s: float
    threads: dict[str, tuple[str, float]]  # thread id -> (name, CPU seconds)
    waiting_s: float


def thread_clock() -> ThreadClock | None:
    """Read from ``/proc/self/task/*/schedstat``; None where there is none (not Linux)."""
    at_s, me = time.perf_counter(), str(threading.get_native_id())
    threads: dict[str, tuple[str, float]] = {}
    waiting_s = None
    try:
        tasks = os.listdir(TASKS_DIR)
    except OSError:
        return None
    for tid in tasks:
        try:
            with open(f"{TASKS_DIR}/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"{TASKS_DIR}/{tid}/schedstat") as f:
                on_cpu_ns, waiting_ns, _ = (int(v) for v in f.read().split())
        except (OSError, ValueError):  # a thread that ended meanwhile; no schedstat
            continue
        threads[tid] = (name, on_cpu_ns / 1e9)
        if tid == me:
            waiting_s = waiting_ns / 1e9
    if waiting_s is None:
        return None
    return ThreadClock(at_s, threads, waiting_s)


def core_shares(before: ThreadClock | None, after: ThreadClock | None) -> dict[str, float] | None:
    """Between two readings, the cores the threads of each name used (CPU seconds / wall
    seconds) and, as ``"waiting"``, the share of the time the calling thread waited for a
    core. A thread born between them counts from 0; one that ended between them is left
    out, since its seconds went with it."""
    if before is None or after is None or after.at_s <= before.at_s:
        return None
    wall_s = after.at_s - before.at_s
    shares: dict[str, float] = {}
    for tid, (name, cpu_s) in after.threads.items():
        earlier = before.threads.get(tid)
        since_s = earlier[1] if earlier is not None and earlier[0] == name else 0.0
        shares[name] = shares.get(name, 0.0) + (cpu_s - since_s) / wall_s
    shares["waiting"] = (after.waiting_s - before.waiting_s) / wall_s
    return shares


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
