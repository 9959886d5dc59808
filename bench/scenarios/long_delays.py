"""Scenario 5, long delays: timers spread over 30 days, on a simulated clock.

Schedule N timers due at random times over ``long_days``, then advance the clock in
steps, delivering at each. Figures: bytes written to storage per timer (process I/O
counter: WAL, flushes, compactions, mmap'd wheel files), and rolls/rewrites per timer:
the wheel re-enqueues a timer beyond its roll window (counted by the store); the
RocksDB store writes each key once and never moves it, which its key-write ticker shows.

A wheel on a simulated clock walks every slot it passes (RocketMQ's dequeue does): 30
days at 10 ms are 259 million slots, hours of Python. So a wheel's span is capped at
``long_max_slots`` slots; the table shows the span each system ran and, for a shorter
span, rolls per timer scaled linearly to the full span (a timer due after d rolls about
d / roll window times, and d is uniform over the span). A wheel's timer count is capped
too, at about ``long_max_rolls`` expected rolls in all (each is a Python body copy).
"""

from __future__ import annotations

from typing import Any

from bench.measure import io_write_bytes, now_ms
from bench.scenarios.common import Column, Context, chunks, timers
from bench.systems import SystemSpec
from bench.systems.engine_system import EngineSystem, wheel_roll_window_ms

KEY = "long_delays"
NUMBER = 5
TITLE = "Long delays over 30 days (simulated clock)"
PAYLOAD = 200
DAY_MS = 24 * 3600 * 1000


def columns(ctx: Context) -> list[Column]:
    return [
        Column("timers", "timers"),
        Column("bytes_written_per_timer", "bytes written / timer", "B", ratio=True, better="lower"),
        Column("schedule_bytes_per_timer", "of which at schedule", "B", better="lower"),
        Column("span_days", "span (days)"),
        Column("rolls_per_timer", "rolls / timer", better="lower"),
        Column("rolls_per_timer_full_span", "rolls / timer over the full span", better="lower"),
        Column("keys_written_per_timer", "RocksDB keys written / timer", better="lower"),
        Column("delivered", "delivered"),
        Column("lateness.early", "early", better="lower"),
    ]


def _rolls(counters: dict[str, Any]) -> int | None:
    store = counters.get("store") or {}
    for name in ("rolls", "rolled", "roll_count"):
        if name in store:
            return int(store[name])
    return None


def run(spec: SystemSpec, ctx: Context) -> dict[str, Any]:
    s = ctx.sizes
    n = spec.size(s.long_timers)
    full_span_ms = s.long_days * DAY_MS
    span_ms = full_span_ms
    if spec.precision_ms is not None:
        span_ms = min(span_ms, s.long_max_slots * spec.precision_ms)
        expected_rolls = span_ms / 2 / wheel_roll_window_ms(spec.precision_ms)
        n = min(n, max(1000, int(s.long_max_rolls / max(1.0, expected_rolls))))
    start_ms = now_ms()
    system = ctx.open(spec, simulated=True, statistics=spec.family == "rocks")
    try:
        rng = ctx.rng
        io0 = io_write_bytes()
        items = timers("l", 0, n, lambda _i: start_ms + rng.randrange(span_ms), PAYLOAD, rng)
        for part in chunks(items, s.batch):
            system.schedule(part, start_ms)
        del items
        io1 = io_write_bytes()
        end_ms = span_ms + (spec.precision_ms or 0)  # a wheel reads a slot once it has passed
        steps = -(-end_ms // s.long_step_ms)
        for step in range(1, steps + 1):
            while system.run_due(start_ms + min(step * s.long_step_ms, end_ms)):
                pass
            ctx.progress(step / steps)
        io2 = io_write_bytes()
        counters = system.counters()
        rolls = _rolls(counters)
        keys_written = None
        if isinstance(system, EngineSystem):
            keys_written = system.ticker("rocksdb.number.keys.written")
            if spec.family == "rocks":
                rolls = 0  # by construction: the key is written once, deleted once
        return {
            "timers": n,
            "step_ms": s.long_step_ms,
            "bytes_written_per_timer": (io2 - io0) / n,
            "schedule_bytes_per_timer": (io1 - io0) / n,
            "span_days": span_ms / DAY_MS,
            "rolls_per_timer": None if rolls is None else rolls / n,
            "rolls_per_timer_full_span": None
            if rolls is None
            else rolls / n * full_span_ms / span_ms,
            "keys_written_per_timer": None if not keys_written else keys_written / n,
            "delivered": system.delivered(),
            "lateness": system.lateness(),
            "counters": counters,
        }
    finally:
        system.close()
