"""Scenario 4, cancel: N pending, cancel every other one, then deliver the rest.

Cancel throughput is the median rate over batches of 1000 (min and max beside it). The
check afterwards: none of the cancelled timers was delivered and every other one was.
Simulated clock where the system has one; APScheduler and the polling peers (Redis,
PostgreSQL) start paused with every timer already due, cancel, then deliver (with
APScheduler's default misfire grace, survivors may be dropped as missed: that counts as
not delivered). JetStream fires on the server's own clock, so its timers are due a few
seconds ahead, long enough to schedule and cancel first (``cancel_overran_ms`` says if
the cancels ran past the due instant all the same).

Then the truth of "too late": a cancel of up to ``LATE_PROBE`` timers already delivered
must remove nothing; ``late_cancel_removed`` counts those a system said it removed.
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
LATE_PROBE = 100
SERVER_CLOCK_LEAD_MS = 3000  # plus SERVER_CLOCK_MS_PER_TIMER for each timer
SERVER_CLOCK_MS_PER_TIMER = 1.5  # schedule + cancel at ~1,500/s on a loaded 2-core box


def columns(ctx: Context) -> list[Column]:
    return [
        Column("timers", "pending"),
        Column("cancel_rate.median", "cancel rate", "/s", ratio=True),
        Column("cancel_rate.min", "min", "/s"),
        Column("cancel_rate.max", "max", "/s"),
        Column("cancelled_but_delivered", "cancelled yet delivered", better="lower"),
        Column("kept_but_not_delivered", "kept yet not delivered", better="lower"),
        Column("late_cancel_removed", "too-late cancels said removed", better="lower"),
    ]


def due_of(spec: SystemSpec, start_ms: int, n: int) -> int:
    """When the timers fall due: an hour ahead on a simulated clock, at once on a paused
    real-clock system, and far enough ahead to cancel first on a server's own clock."""
    if spec.sim_clock:
        return start_ms + HOUR_MS
    if spec.server_clock:
        return start_ms + SERVER_CLOCK_LEAD_MS + int(n * SERVER_CLOCK_MS_PER_TIMER)
    return start_ms


def run(spec: SystemSpec, ctx: Context) -> dict[str, Any]:
    n = spec.size(ctx.sizes.cancel_timers)
    start_ms = now_ms()
    system = ctx.open(spec, simulated=spec.sim_clock, record_ids=True)
    try:
        due_ms = due_of(spec, start_ms, n)
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
        cancelled_ms = now_ms()
        if spec.sim_clock:
            drain_sim(system, due_ms + HOUR_MS, len(kept))
        else:
            system.start()
            wait_until(lambda: settled(system) >= len(kept), 30 + len(kept) / 100)
        ctx.progress(1.0)
        delivered = system.delivered_ids()
        late = sorted(delivered)[:LATE_PROBE]
        return {
            "late_cancel_probe": len(late),
            "late_cancel_removed": system.cancel(late) if late else None,
            "cancel_overran_ms": max(0, cancelled_ms - due_ms) if spec.server_clock else None,
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
