"""What the Prometheus telemetry costs the delivery path, measured side by side.

The same 200,000 timers (8 topics, 200-byte payloads) are delivered by ``Engine.run_once``
into the embedded topic log with and without a ``Telemetry``, alternating, on fresh
RocksDB stores; the medians and their ratio are printed.
Run: ``python -m bench.telemetry_cost``.
"""

from __future__ import annotations

import statistics
import tempfile
import time

from app.clock import FakeClock
from app.engine import Engine, EngineSettings
from app.telemetry import Telemetry
from storage.protocol import NewTimer
from storage.rocks import RocksSettings, RocksTimerStore

START_MS = 1_700_000_000_000
COUNT = 200_000
REPEATS = 3


def delivered_per_second(with_telemetry: bool) -> float:
    with tempfile.TemporaryDirectory() as path:
        store = RocksTimerStore(RocksSettings(path))
        for start in range(0, COUNT, 1000):
            timers = [
                NewTimer(f"t{i % 8}", f"{i:07d}", START_MS + i // 50, b"p" * 200)
                for i in range(start, start + 1000)
            ]
            store.schedule(timers, START_MS)
        telemetry = Telemetry() if with_telemetry else None
        engine = Engine(
            store, FakeClock(START_MS), EngineSettings(scan_batch=1000), telemetry=telemetry
        )
        started = time.perf_counter()
        delivered = engine.run_once(START_MS + COUNT)
        seconds = time.perf_counter() - started
        store.close()
    assert delivered == COUNT
    return COUNT / seconds


def main() -> None:
    rates: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(REPEATS):
        for with_telemetry in (False, True):
            rates[with_telemetry].append(delivered_per_second(with_telemetry))
    for with_telemetry, label in ((False, "without"), (True, "with")):
        values = rates[with_telemetry]
        print(f"{label:8} telemetry: median {statistics.median(values):,.0f} timers/s {values}")
    ratio = statistics.median(rates[True]) / statistics.median(rates[False])
    print(f"with / without: {ratio:.3f}")


if __name__ == "__main__":
    main()
