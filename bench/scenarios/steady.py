"""Scenario 3, steady: timers fall due at a constant rate while new ones keep arriving.

A producer schedules a batch every 10 ms, each timer due ``steady_delay_ms`` later, for
``steady_seconds``; the engine delivers on the real clock in the same process. A rate
that is not a whole number of timers per tick carries the fraction to the next tick, so
the offered rate is the one asked for. Figures: offered and achieved arrival rate,
lateness percentiles, early deliveries (must be 0).
"""

from __future__ import annotations

import time
from typing import Any

from bench.measure import now_ms
from bench.scenarios.burst import settled
from bench.scenarios.common import Column, Context, fixed, timers, wait_until
from bench.systems import BenchSystem, SystemSpec

KEY = "steady"
NUMBER = 3
TITLE = "Steady: timers falling due at a constant rate"
PAYLOAD = 100
TICK_MS = 10
TICK_S = TICK_MS / 1000


def columns(ctx: Context) -> list[Column]:
    return [
        Column("rate_offered", "offered", "/s"),
        Column("rate_achieved", "achieved", "/s", ratio=True),
        Column("lateness.p50_ms", "p50 late", "ms", better="lower"),
        Column("lateness.p99_ms", "p99 late", "ms", ratio=True, better="lower"),
        Column("lateness.max_ms", "max late", "ms", better="lower"),
        Column("lateness.early", "early", better="lower"),
        Column("never_delivered", "never delivered", better="lower"),
    ]


def run(spec: SystemSpec, ctx: Context) -> dict[str, Any]:
    rate = steady_rate(spec, ctx)
    system = ctx.open(spec, simulated=False)
    try:
        return run_steady(system, ctx, rate)
    finally:
        system.close()


def steady_rate(spec: SystemSpec, ctx: Context) -> int:
    return max(10, int(ctx.sizes.steady_rate * min(1.0, spec.scale * 4)))


def run_steady(system: BenchSystem, ctx: Context, rate: int) -> dict[str, Any]:
    """Offer ``rate`` timers a second for ``steady_seconds`` while the engine runs, wait
    for them, stop the engine; the figures (also on a store that holds others: the growth
    scenario's steady rate at size)."""
    s = ctx.sizes
    sent = ticks = 0
    system.start()
    started = time.monotonic()
    next_tick = started
    while (elapsed := time.monotonic() - started) < s.steady_seconds:
        ticks += 1
        count = rate * ticks * TICK_MS // 1000 - sent  # the fraction carries over
        if count:
            t = now_ms()
            items = timers("s", sent, count, fixed(t + s.steady_delay_ms), PAYLOAD, ctx.rng)
            system.schedule(items, t)
            sent += count
        ctx.progress(min(0.9, elapsed / s.steady_seconds * 0.9))
        next_tick += TICK_S
        time.sleep(max(0.0, next_tick - time.monotonic()))
    produce_s = time.monotonic() - started
    wait_until(lambda: settled(system) >= sent, s.steady_delay_ms / 1000 + 10)
    system.stop()
    delivered = system.delivered()
    return {
        "rate_offered": rate,
        "rate_achieved": sent / produce_s,
        "scheduled": sent,
        "delivered": delivered,
        "never_delivered": sent - delivered,
        "lateness": system.lateness(),
        "counters": system.counters(),
    }
