"""The pending index is the wheel's one memory cost per pending timer: measure it."""

from __future__ import annotations

import tracemalloc

from storage.protocol import NewTimer
from storage.wheel import WheelSettings, WheelTimerStore

NOW = 1_700_000_000_000


def test_index_memory_per_pending_timer_is_a_few_hundred_bytes(tmp_path):
    settings = WheelSettings(str(tmp_path / "w"), precision_ms=100, slots=1000,
                             roll_window_ms=60_000)  # fmt: skip
    store = WheelTimerStore(settings)
    batch = [NewTimer("orders", f"order-{i:08d}", NOW + 10 * i) for i in range(5000)]
    store.schedule(batch[:10], NOW)  # warm up the structures that do not grow
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    store.schedule(batch[10:], NOW)
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(s.size_diff for s in after.compare_to(before, "filename"))
    per_timer = grown / 4990
    assert 100 < per_timer < 600, per_timer  # docs/wheel.md quotes this figure
    store.close()
