"""Scenario 2, burst: N timers due in the same instant, on the real clock.

The delivery engine runs while the timers are scheduled, all due at one instant T
chosen so the schedule ends before it (from a calibration run on a throwaway store,
whose writes are reported as ``io_write_bytes_excluded`` and left out of the disk
figures).
Figures: seconds from T until every timer was delivered, lateness p50/p99/max,
timers never delivered, and RSS growth (peak minus the RSS before scheduling). Beside them,
the seconds that as many plain RocksDB puts take on this machine in the same run
(``raw_puts_s``): the burst is judged as a ratio to it, so a slow hour does not fail it.
"""

from __future__ import annotations

import shutil
import time
from typing import Any

from bench.core_throughput import raw_put_seconds
from bench.measure import RssSampler, io_write_bytes, now_ms
from bench.scenarios.common import Column, Context, fixed, timers, wait_until
from bench.systems import BenchSystem, SystemSpec
from bench.systems.aps import ApsSystem

KEY = "burst"
NUMBER = 2
TITLE = "Burst: timers due in the same second"
PAYLOAD = 100
MB = 1 << 20


def columns(ctx: Context) -> list[Column]:
    return [
        Column("timers", "timers"),
        Column("deliver_all_s", "all delivered after (s)", "s", ratio=True, better="lower"),
        Column("lateness.p50_ms", "p50 late", "ms", better="lower"),
        Column("lateness.p99_ms", "p99 late", "ms", ratio=True, better="lower"),
        Column("lateness.max_ms", "max late", "ms", better="lower"),
        Column("never_delivered", "never delivered", better="lower"),
        Column("rss_growth_mb", "RSS growth", "MB", better="lower"),
    ]


def calibrate_rate(spec: SystemSpec, ctx: Context, n: int) -> float:
    """Schedule rate (timers/s) of this system on a throwaway instance, timed as the burst
    schedules: each batch made and then scheduled (making them is part of the burst's
    schedule time too)."""
    probe = max(200, min(100_000, n // 20))
    system = spec.open(f"{ctx.workdir}/calibrate", simulated=False)
    try:
        t0 = now_ms()
        started = time.perf_counter()
        for start in range(0, probe, ctx.sizes.batch):
            count = min(ctx.sizes.batch, probe - start)
            system.schedule(timers("c", start, count, fixed(t0 + 3_600_000), PAYLOAD, ctx.rng), t0)
        return probe / (time.perf_counter() - started)
    finally:
        system.close()
        shutil.rmtree(f"{ctx.workdir}/calibrate", ignore_errors=True)


def settled(system: BenchSystem) -> int:
    return system.settled() if isinstance(system, ApsSystem) else system.delivered()


def run(spec: SystemSpec, ctx: Context) -> dict[str, Any]:
    n = spec.size(ctx.sizes.burst_timers)
    io_before = io_write_bytes()
    lead_ms = lead_time_ms(spec, ctx, n)
    raw_puts_s = raw_put_seconds(n, f"{ctx.workdir}/raw-puts")
    shutil.rmtree(f"{ctx.workdir}/raw-puts", ignore_errors=True)
    calibration_io = io_write_bytes() - io_before  # the runner leaves it out of disk writes
    system = ctx.open(spec, simulated=False)
    try:
        return {
            **deliver_burst(system, ctx, n, lead_ms),
            "raw_puts_s": raw_puts_s,
            "io_write_bytes_excluded": calibration_io,
        }
    finally:
        system.close()


LEAD_FACTOR = 2.5  # the calibrated schedule time times this, plus LEAD_PLUS_MS
LEAD_PLUS_MS = 1500


def lead_time_ms(spec: SystemSpec, ctx: Context, n: int) -> int:
    """How far ahead the burst is due: its schedule, at the calibrated rate, with room.

    The room is wide because a short probe on an empty store runs faster than the burst's
    own schedule, which fills the memtables while the engine runs: on 27 Nov a factor of
    1.5 over a probe of 20,000 (items made before the clock started) left the 1,000,000
    timers' schedule 2.2 s past its due instant, so "all delivered after" counted the
    schedule's tail (``schedule_overran_ms`` says when that happens). A longer lead costs
    the run a few seconds and changes no figure: lateness counts from the due instant."""
    return int(n / calibrate_rate(spec, ctx, n) * 1000 * LEAD_FACTOR) + LEAD_PLUS_MS


def deliver_burst(system: BenchSystem, ctx: Context, n: int, lead_ms: int) -> dict[str, Any]:
    """Schedule ``n`` timers due ``lead_ms`` from now while the engine runs, wait for
    their delivery, stop the engine; the figures (also on a store that holds others:
    the growth scenario's burst at size)."""
    with RssSampler() as rss:
        system.start()
        due_ms = now_ms() + lead_ms
        batch = ctx.sizes.batch
        for start in range(0, n, batch):  # made per batch: a 1M list would inflate RSS
            part = timers("b", start, min(batch, n - start), fixed(due_ms), PAYLOAD, ctx.rng)
            system.schedule(part, now_ms())
            ctx.progress(min(0.5, (start + len(part)) / n / 2))
        scheduled_ms = now_ms()
        wait_until(lambda: now_ms() >= due_ms, lead_ms / 1000 + 1)
        complete = wait_until(
            lambda: settled(system) >= n,
            ctx.sizes.burst_timeout_s,
            tick=lambda _f: ctx.progress(0.5 + settled(system) / n / 2),
        )
        done_ms = now_ms()
        system.stop()
    delivered = system.delivered()
    return {
        "timers": n,
        "lead_ms": lead_ms,
        "schedule_overran_ms": max(0, scheduled_ms - due_ms),
        "deliver_all_s": (done_ms - due_ms) / 1000 if complete and delivered >= n else None,
        "timed_out": not complete,
        "delivered": delivered,
        "never_delivered": n - delivered,
        "lateness": system.lateness(),
        "rss_base_mb": rss.base / MB,
        "rss_peak_mb": rss.peak / MB,
        "rss_growth_mb": (rss.peak - rss.base) / MB,
        "counters": system.counters(),
    }
