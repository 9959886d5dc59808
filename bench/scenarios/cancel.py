"""Scenario 4, cancel: N pending, cancel every other one, then deliver the rest.

Cancel throughput is the median rate over batches of 1000 (min and max beside it). The
check afterwards: none of the cancelled timers was delivered and every other one was.
Simulated clock where the system has one; APScheduler starts paused with every job
already due, cancels, then resumes (with the default misfire grace, survivors may be
dropped as missed: that counts as not delivered).
"""

from __future__ import annotations

import time
from typing import Any

from bench.measure import now_ms, window_stats
from bench.scenarios.burst import settled
from bench.scenarios.common import Column, Context, chunks, drain_sim, timers, wait_until
from bench.systems import SystemSpec

KEY = "cancel"
NUMBER = 4
TITLE = "Cancel half of the pending timers"
PAYLOAD = 100
HOUR_MS = 3_600_000
CANCEL_BATCH = 1000


def columns(ctx: Context) -> list[Column]:
    return [
        Column("timers", "pending"),
        Column("cancel_rate.median", "cancel rate", "/s", ratio=True),
        Column("cancel_rate.min", "min", "/s"),
        Column("cancel_rate.max", "max", "/s"),
        Column("cancelled_but_delivered", "cancelled yet delivered", better="lower"),
        Column("kept_but_not_delivered", "kept yet not delivered", better="lower"),
    ]


def run(spec: SystemSpec, ctx: Context) -> dict[str, Any]:
    n = spec.size(ctx.sizes.cancel_timers)
    start_ms = now_ms()
    system = ctx.open(spec, simulated=spec.sim_clock, record_ids=True)
    try:
        due_ms = start_ms + HOUR_MS if spec.sim_clock else start_ms
        items = timers("k", 0, n, lambda i: due_ms + i % 1000, PAYLOAD, ctx.rng)
        for part in chunks(items, ctx.sizes.batch):
            system.schedule(part, start_ms)
        ctx.progress(0.3)
        victims = [t.id for t in items[::2]]
        kept = {t.id for t in items[1::2]}
        del items
        rates, removed = [], 0
        for part in chunks(victims, CANCEL_BATCH):
            t0 = time.perf_counter()
            removed += system.cancel(part)
            rates.append(len(part) / (time.perf_counter() - t0))
        ctx.progress(0.6)
        if spec.sim_clock:
            drain_sim(system, due_ms + HOUR_MS, len(kept))
        else:
            system.start()
            wait_until(lambda: settled(system) >= len(kept), 30 + len(kept) / 100)
        ctx.progress(1.0)
        delivered = system.delivered_ids()
        return {
            "timers": n,
            "cancel_requested": len(victims),
            "removed": removed,
            "cancel_rate": window_stats(rates),
            "cancelled_but_delivered": len(delivered.intersection(victims)),
            "kept_but_not_delivered": len(kept - delivered),
            "pending_end": system.pending(),
            "counters": system.counters(),
        }
    finally:
        system.close()
