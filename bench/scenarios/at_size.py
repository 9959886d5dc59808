"""The growth scenario's burst and steady rate on the grown store (``--growth-at-size``).

RIP-43's question is capacity beyond memory: does delivery stay on time when the store
holds far more than fits in RAM? After the 200 B variant has grown, its store is reopened
on the real clock (the growth ran on a simulated one) and the burst scenario's burst
(``burst_timers`` due at one instant) and then the steady scenario's rate run on it,
beside the timers already there (due 1 to 31 days ahead, so none of them falls due
meanwhile). Each runs on its own open of the store: an engine is started once.
Their lateness stands beside the burst and steady scenarios' on an empty store in the
same run (``timerstore bench --full --scenario burst,steady,growth --growth-at-size``).
Each phase's counters say whether writes stalled and how much compaction the growth
left to do (RocksDB's properties: statistics would cost every write, and the empty-store
burst and steady beside them run without).
"""

from __future__ import annotations

from typing import Any

from bench.scenarios.burst import deliver_burst, lead_time_ms
from bench.scenarios.common import Context
from bench.scenarios.steady import run_steady, steady_rate
from bench.systems import SystemSpec

PAYLOAD_BYTES = 200  # the variant it runs after: the one --growth-pending takes far


def wanted(ctx: Context, size: int, blob: bool) -> bool:
    return ctx.sizes.growth_at_size and size == PAYLOAD_BYTES and not blob


def measure(spec: SystemSpec, ctx: Context, sub: str) -> dict[str, Any]:
    """Burst, then steady, each on the grown store in ``sub`` opened on the real clock."""
    n = spec.size(ctx.sizes.burst_timers)
    lead_ms = lead_time_ms(spec, ctx, n)
    system = ctx.open(spec, sub=sub, simulated=False)
    try:
        pending = system.pending()
        burst = deliver_burst(system, ctx, n, lead_ms)
    finally:
        system.close()
    system = ctx.open(spec, sub=sub, simulated=False)
    try:
        steady = run_steady(system, ctx, steady_rate(spec, ctx))
    finally:
        system.close()
    return {"pending_before": pending, "burst": burst, "steady": steady}
