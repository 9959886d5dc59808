"""Scenario 1, enqueue throughput: schedule calls of batch 1, 100, 1000 x payload sizes.

Each combination runs several windows of about the same number of timers into one
store; the figure is the median window rate (timers/s) with min and max beside it.
Delivery times are spread at random over the next 30 days, so keys arrive unsorted
(what RIP-43 calls the sorting cost on write). APScheduler has no batch call: a batch
is a loop of ``add_job``. A system whose every call waits for an fsync or a quorum
(``slow_calls``) gets windows of at most ``enqueue_sync_window_calls`` calls.
"""

from __future__ import annotations

import time
from typing import Any

from bench.measure import now_ms, window_stats
from bench.scenarios.common import Column, Context, chunks, timers
from bench.systems import Skip, SystemSpec

KEY = "enqueue"
NUMBER = 1
TITLE = "Enqueue throughput"
DAY_MS = 24 * 3600 * 1000
CHART_GROUPED = True  # one chart of all combinations


def combos(ctx: Context) -> list[tuple[int, int]]:
    s = ctx.sizes
    return [(b, p) for p in s.enqueue_payloads for b in s.enqueue_batches]


def columns(ctx: Context) -> list[Column]:
    return [
        Column(f"combos.b{b}_p{p}.median", f"batch {b}, {p} B", "/s", ratio=True)
        for b, p in combos(ctx)
    ]


def window_timers(ctx: Context, spec: SystemSpec, batch: int, size: int) -> int:
    s = ctx.sizes
    n = min(s.enqueue_window_timers, max(batch, s.enqueue_window_bytes // size))
    n = spec.size(n, floor=50)
    if spec.slow_calls:  # an fsync or a quorum round per call: ~1,000 calls/s at best
        n = min(n, s.enqueue_sync_window_calls * batch)
    if spec.family == "aps":
        return n  # no batch call: a batch is a loop of add_job, so any window size will do
    return max(batch, n // batch * batch)


def run(spec: SystemSpec, ctx: Context) -> dict[str, Any]:
    if spec.delivery_only:
        raise Skip("same enqueue path as its misfire-default twin (the policy acts on delivery)")
    system = ctx.open(spec, simulated=spec.sim_clock)
    rng = ctx.rng
    start_ms = now_ms()
    out: dict[str, Any] = {"combos": {}}
    todo = combos(ctx)
    next_id = 0
    try:
        for done, (batch, size) in enumerate(todo):
            n = window_timers(ctx, spec, batch, size)
            rates = []
            for _ in range(ctx.sizes.enqueue_windows):
                items = timers(
                    "e",
                    next_id,
                    n,
                    lambda _i: start_ms + DAY_MS + rng.randrange(30 * DAY_MS),
                    size,
                    rng,
                )
                next_id += n
                t0 = time.perf_counter()
                for part in chunks(items, batch):
                    system.schedule(part, start_ms)
                rates.append(n / (time.perf_counter() - t0))
            stats = window_stats(rates)
            stats.update({"window_timers": n, "rates": rates})
            out["combos"][f"b{batch}_p{size}"] = stats
            ctx.progress((done + 1) / len(todo))
        out["pending_end"] = system.pending()
    finally:
        system.close()
    return out
