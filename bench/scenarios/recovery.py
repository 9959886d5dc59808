"""Scenario 7, recovery: SIGKILL a process holding N pending timers while it delivers.

A child process schedules N timers (the last tenth, at most 50,000, due within a second
so delivery is under way: 1% of the full 5,000,000; the rest due in an hour) and is
killed with SIGKILL shortly after its last acknowledged schedule.
The parent then reopens the store on the real clock and measures the time until it is
ready (open plus a stats read) and until the engine's first delivery (``first_delivery_s``,
from the reopen), stops it, reopens it on a simulated clock to deliver the rest at once,
and reads the whole topic log:
an acknowledged timer missing from the log is lost (must be 0), one that appears twice
was delivered twice. (A peer's server is killed instead: see ``recovery_peer``.)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any

from bench.measure import now_ms
from bench.scenarios import recovery_peer
from bench.scenarios.common import Column, Context, drain_sim, wait_until
from bench.systems import PEER_FAMILIES, Skip, SystemSpec
from bench.systems.base import TOPIC
from bench.systems.engine_system import EngineSystem
from storage.protocol import NewTimer

KEY = "recovery"
NUMBER = 7
TITLE = "Recovery after SIGKILL"
KILL_AFTER_S = 0.5
PROBE_TOPIC = "recovery-probe"
FIRST_DELIVERY_TIMEOUT_S = 120.0


def columns(ctx: Context) -> list[Column]:
    return [
        Column("acked", "acknowledged"),
        Column("pending_at_reopen", "pending at reopen"),
        Column("ready_s", "ready after (s)", "s", ratio=True, better="lower"),
        Column("first_delivery_s", "first delivery after (s)", "s", better="lower"),
        Column("lost", "lost", better="lower"),
        Column("lost_not_due", "of which not yet due", better="lower"),
        Column("delivered_twice", "delivered twice", better="lower"),
    ]


def run_child(spec: SystemSpec, ctx: Context, path: str, n: int) -> int:
    cmd = [
        sys.executable,
        "-m",
        "bench.scenarios.recovery_child",
        spec.name,
        path,
        str(n),
        str(ctx.sizes.batch),
    ]
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=os.getcwd())
    acked = 0
    assert child.stdout is not None
    try:
        for line in child.stdout:
            if line.startswith("A "):
                acked = int(line.split()[1])
                ctx.progress(0.6 * acked / n)
            elif line.startswith("DONE"):
                break
        time.sleep(KILL_AFTER_S)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
    if child.returncode != -signal.SIGKILL:
        raise RuntimeError(f"the child ended with {child.returncode} before it was killed")
    return acked


def _reopen_live(spec: SystemSpec, path: str) -> tuple[int, float, float | None, int]:
    """Reopen the killed store on the real clock as a restarted service would: pending
    count and seconds until ready (open plus a stats read), seconds from the reopen until
    the engine's first delivery, and how many it delivered (the probe too, if it came)
    before it was stopped.

    A probe timer on a topic of its own, due at once, makes sure there is something to
    deliver (every timer due soon may have been delivered before the kill), as the peers'
    recovery does (``recovery_peer``); the audit reads ``TOPIC`` only."""
    started = time.perf_counter()
    system = spec.open(path, simulated=False)
    assert isinstance(system, EngineSystem)
    try:
        pending = system.pending()
        ready_s = time.perf_counter() - started
        probe_ms = now_ms()
        system.store.schedule([NewTimer(PROBE_TOPIC, "probe", probe_ms, b"p")], probe_ms)
        system.start()
        delivered = wait_until(lambda: system.delivered() > 0, FIRST_DELIVERY_TIMEOUT_S)
        first_delivery_s = time.perf_counter() - started if delivered else None
        system.stop()
        return pending, ready_s, first_delivery_s, system.delivered()
    finally:
        system.close()


def run(spec: SystemSpec, ctx: Context) -> dict[str, Any]:
    if spec.family in PEER_FAMILIES:
        return recovery_peer.run(spec, ctx)
    if spec.family not in ("rocks", "rocks-sync", "wheel"):
        raise Skip("no durable store with a delivery log to audit (in-memory, or not measured)")
    n = spec.size(ctx.sizes.recovery_pending)
    path = os.path.join(ctx.workdir, "store")
    acked = run_child(spec, ctx, path, n)
    pending, ready_s, first_delivery_s, delivered_live = _reopen_live(spec, path)
    system = spec.open(path, simulated=True)  # the audit: deliver the rest at once
    assert isinstance(system, EngineSystem)
    ctx.opened.append(system)
    try:
        # left: the pending ones not delivered live, and the probe (live or not: once)
        drain_sim(system, now_ms() + 2 * 3_600_000, pending + 1 - delivered_live)
        ctx.progress(0.8)
        probes = len(system.store.read_log(PROBE_TOPIC, 0, 10))  # delivered live or now
        seen = bytearray(n)
        extra = offset = 0
        while page := system.store.read_log(TOPIC, offset, 10_000):
            for message in page:
                i = int(message.id[1:])
                if i < n:
                    seen[i] = min(255, seen[i] + 1)
                else:
                    extra += 1
            offset = page[-1].offset + 1
        return {
            "timers": n,
            "acked": acked,
            "pending_at_reopen": pending,
            "ready_s": ready_s,
            "first_delivery_s": first_delivery_s,
            "delivered_after_reopen": delivered_live + system.delivered() - probes,
            "log_messages": offset,
            "lost": sum(1 for i in range(acked) if seen[i] == 0),
            "delivered_twice": sum(1 for c in seen if c > 1),
            "unknown_ids": extra,
            "counters": system.counters(),
        }
    finally:
        system.close()
