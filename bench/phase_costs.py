"""Where one timer's microseconds go in the RocksDB store (not a test; docs/perf.md).

Schedules ``--timers`` timers in batches of 1000 (200 B payloads, as ``core_throughput``),
then delivers them with ``Engine.run_once``, and reports thread CPU time per timer for
each phase: the store's schedule, due scan and commit, and the ``db.write`` inside them.
The timing wraps the store's module functions for the length of the run; CPU time of the
calling thread is less disturbed by other processes than wall time.

    .venv/bin/python -m bench.phase_costs --timers 300000
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from app.clock import FakeClock
from app.engine import Engine, EngineSettings
from bench.core_throughput import BATCH, START_MS, make_batches
from storage.rocks import RocksSettings, RocksTimerStore, delivery, writes
from storage.rocks import core as rocks_core

SECONDS: defaultdict[str, float] = defaultdict(float)


def _timed(label: Callable[[], str], fn: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            SECONDS[label()] += time.thread_time() - started

    return run


def measure(count: int) -> dict[str, float]:
    phase = ["schedule"]
    writes.schedule = _timed(lambda: "schedule", writes.schedule)
    delivery.due = _timed(lambda: "due scan", delivery.due)
    delivery.commit_delivered = _timed(lambda: "commit", delivery.commit_delivered)
    rocks_core.RocksCore.write = _timed(  # type: ignore[method-assign]
        lambda: f"db.write in {phase[0]}", rocks_core.RocksCore.write
    )
    batches = make_batches(count)
    with tempfile.TemporaryDirectory() as tmp:
        store = RocksTimerStore(RocksSettings(os.path.join(tmp, "rocks")))
        for batch in batches:
            store.schedule(batch, START_MS)
        phase[0] = "commit"
        engine = Engine(store, FakeClock(START_MS), EngineSettings(scan_batch=BATCH))
        started = time.thread_time()
        assert engine.run_once(START_MS + 10 * 3_600_000) == count
        SECONDS["deliver, all"] = time.thread_time() - started
        store.close()
    return {name: seconds / count * 1e6 for name, seconds in sorted(SECONDS.items())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timers", type=int, default=300_000)
    args = parser.parse_args(argv)
    for name, micros in measure(args.timers).items():
        print(f"{name:24s} {micros:6.2f} us/timer")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
