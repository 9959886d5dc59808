"""Scenario 7 on a peer: SIGKILL its server (every node) while it holds N pending timers.

The bench process schedules N timers (the last tenth, at most 50,000, due within a
second, the rest in an hour) with delivery running, then SIGKILLs the server's
processes shortly after the last acknowledged batch. It restarts them on the same data
and measures the seconds until the server answers with its data loaded (``ready_s``) and
until the first timer is delivered after the restart (``first_delivery_s``: a due timer
left over, or a probe due at once, scheduled as soon as the server answers). An
acknowledged timer neither delivered before the kill nor pending after the restart (nor
delivered since) is lost; one delivered before the kill and pending again after it would
be delivered twice. ``lost_not_due`` counts the lost ones that were not yet due at the
kill: a poller's take (Redis's script, PostgreSQL's DELETE) that the server committed
but whose reply died with it loses due timers only, at most one batch.
"""

from __future__ import annotations

import random
import time
from typing import Any

from bench.measure import now_ms
from bench.scenarios.common import Context, timers, wait_until
from bench.systems import BenchTimer, SystemSpec
from bench.systems.peer import PeerSystem

HOT_SPREAD_MS = 1000
HOT_MAX = 50_000
COLD_DELAY_MS = 3_600_000
KILL_AFTER_S = 0.5
FIRST_DELIVERY_TIMEOUT_S = 60.0
QUIET_S = 1.5


def hot_count(n: int) -> int:
    """The last ones scheduled, due within a second: delivery is under way at the kill."""
    return min(n // 10, HOT_MAX)


def schedule_all(system: PeerSystem, ctx: Context, n: int) -> int:
    rng = random.Random(7)
    hot = hot_count(n)
    acked = 0
    while acked < n:
        count = min(ctx.sizes.batch, n - acked)
        t = now_ms()

        def due(i: int, t: int = t) -> int:
            return t + (rng.randrange(HOT_SPREAD_MS) if i >= n - hot else COLD_DELAY_MS)

        system.schedule(timers("r", acked, count, due, 100, rng), t)
        acked += count
        ctx.progress(0.5 * acked / n)
    return acked


def settle(system: PeerSystem) -> None:
    """Wait (bounded) until deliveries stop for ``QUIET_S``: the hot timers left over."""
    deadline = time.monotonic() + FIRST_DELIVERY_TIMEOUT_S
    seen, quiet_since = system.delivered(), time.monotonic()
    while time.monotonic() - quiet_since < QUIET_S and time.monotonic() < deadline:
        time.sleep(0.05)
        if system.delivered() != seen:
            seen, quiet_since = system.delivered(), time.monotonic()


def run(spec: SystemSpec, ctx: Context) -> dict[str, Any]:
    n = spec.size(ctx.sizes.recovery_pending)
    system = ctx.open(spec, simulated=False, record_ids=True)
    assert isinstance(system, PeerSystem)
    try:
        system.start()
        acked = schedule_all(system, ctx, n)
        time.sleep(KILL_AFTER_S)  # delivery under way, as for the engine's child process
        system.kill_server()
        system.stop()
        before = system.delivered_ids()
        restarted_ms = now_ms()
        system.first_delivery_ms, system.first_from_ms = None, restarted_ms
        ready_s = system.restart_server()
        pending = system.pending_ids()
        ctx.progress(0.7)
        probe = now_ms()
        system.schedule([BenchTimer("probe", probe, b"p")], probe)
        system.start()
        wait_until(lambda: system.first_delivery_ms is not None, FIRST_DELIVERY_TIMEOUT_S)
        first = system.first_delivery_ms
        settle(system)  # what fired before the kill but was not read yet is read now
        system.stop()
        after = system.delivered_ids() - before
        survived = system.pending_ids() | after
        seen = before | survived
        return {
            "timers": n,
            "acked": acked,
            "pending_at_reopen": len(pending),
            "ready_s": ready_s,
            "first_delivery_s": None if first is None else (first - restarted_ms) / 1000,
            "delivered_before_kill": len(before),
            "lost": sum(1 for i in range(acked) if f"r{i}" not in seen),
            "lost_not_due": sum(1 for i in range(acked - hot_count(n)) if f"r{i}" not in seen),
            "delivered_twice": len(before & survived),
            "counters": system.counters(),
        }
    finally:
        system.close()
