"""Scenario 9, tombstones: does the due scan stay cheap after many deliveries?

The first empty scan of a phase is reported, and the median of five more beside it
(``empty_scan_again_ms``): after a restart the first scan may pay once for what
housekeeping has not compacted yet; later ticks must not.

Delivered timers are deleted at the low end of the key space; a scan that starts at the
first key wades through their tombstones until compaction. Probes at each phase: an
empty due scan (nothing due: pure overhead) and delivering ``tombstone_probe`` due
timers, timed, with RocksDB's ``rocksdb.number.iter.skip`` ticker (entries the
iterators stepped over) where the store has it. Phases: fresh; after D deliveries; after
a restart (the scan starts at the persisted watermark); after ``housekeep`` (watermark
advance, range delete, compaction), in process and after another restart.
"""

from __future__ import annotations

import time
from typing import Any

from bench.measure import now_ms
from bench.scenarios.common import Column, Context, drain_sim, fixed, timers
from bench.systems import BenchSystem, Skip, SystemSpec
from bench.systems.engine_system import EngineSystem

KEY = "tombstones"
NUMBER = 9
TITLE = "Tombstones: due-scan cost after many deliveries"
PAYLOAD = 100
CHUNK = 50_000
SKIP = "rocksdb.number.iter.skip"
REPEAT = 5  # empty scans after the first one: their median shows what later ticks pay
PHASES = ("fresh", "delivered", "restarted", "housekept", "housekept_restarted")


def columns(ctx: Context) -> list[Column]:
    cols = [Column("deliveries", "deliveries")]
    for phase in PHASES:
        cols.append(
            Column(f"phases.{phase}.empty_scan_ms", f"empty scan {phase}", "ms", better="lower")
        )
    for phase in PHASES:
        cols.append(Column(f"phases.{phase}.iter_skip", f"skipped {phase}", better="lower"))
    cols.append(Column("phases.restarted.empty_scan_again_ms", "later scans restarted", "ms"))
    cols.append(Column("phases.restarted.iter_skip_again", "skipped later restarted"))
    cols.append(Column("housekeep_s", "housekeep", "s", better="lower"))
    return cols


class Prober:
    def __init__(self, system: BenchSystem, ctx: Context, clock_ms: int) -> None:
        self.system, self.ctx, self.clock_ms, self.seq = system, ctx, clock_ms, 0

    def skip(self) -> int | None:
        return self.system.ticker(SKIP) if isinstance(self.system, EngineSystem) else None

    def probe(self) -> dict[str, Any]:
        s, p = self.system, self.ctx.sizes.tombstone_probe
        self.clock_ms += 1
        t = self.clock_ms
        skip0 = self.skip()
        empty_ms = self.empty_scan_ms(t)
        skip1 = self.skip()
        again_ms = sorted(self.empty_scan_ms(t) for _ in range(REPEAT))[REPEAT // 2]
        skip_again = self.skip()
        s.schedule(timers("p", self.seq, p, lambda _i: t, PAYLOAD, self.ctx.rng), t)
        self.seq += p
        before = s.delivered()
        started = time.perf_counter()
        while s.delivered() - before < p and s.run_due(t):
            pass
        deliver_ms = (time.perf_counter() - started) * 1000
        skip2 = self.skip()
        return {
            "empty_scan_ms": empty_ms,
            "empty_scan_again_ms": again_ms,
            "probe_deliver_ms": deliver_ms,
            "iter_skip": None if skip0 is None or skip1 is None else skip1 - skip0,
            "iter_skip_again": None if skip1 is None or skip_again is None else skip_again - skip1,
            "iter_skip_probe": None if skip_again is None or skip2 is None else skip2 - skip_again,
        }

    def empty_scan_ms(self, t: int) -> float:
        s = self.system
        started = time.perf_counter()
        if isinstance(s, EngineSystem):
            s.store.due(t, 1000)
        else:
            s.run_due(t)
        return (time.perf_counter() - started) * 1000


def run(spec: SystemSpec, ctx: Context) -> dict[str, Any]:
    if not spec.sim_clock:
        raise Skip("needs a simulated clock to deliver millions without waiting")
    d = ctx.sizes.tombstone_deliveries
    system = ctx.open(spec, simulated=True, statistics=spec.family == "rocks")
    prober = Prober(system, ctx, now_ms())
    out: dict[str, Any] = {"deliveries": d, "phases": {}}
    phases = out["phases"]
    try:
        phases["fresh"] = prober.probe()
        done = 0
        started = time.perf_counter()
        while done < d:
            count = min(CHUNK, d - done)
            prober.clock_ms += 1
            t = prober.clock_ms
            system.schedule(timers("d", done, count, fixed(t), PAYLOAD, ctx.rng), t)
            drain_sim(system, t, system.delivered() + count)
            done += count
            ctx.progress(0.8 * done / d)
        out["deliver_rate"] = d / (time.perf_counter() - started)
        phases["delivered"] = prober.probe()
        if isinstance(system, EngineSystem):
            out["restart_ready_s"] = system.reopen()
            phases["restarted"] = prober.probe()
            started = time.perf_counter()
            out["housekeep"] = _plain(system.store.housekeep(prober.clock_ms))
            out["housekeep_s"] = time.perf_counter() - started
            phases["housekept"] = prober.probe()
            system.reopen()
            phases["housekept_restarted"] = prober.probe()
            out["counters"] = system.counters()
        ctx.progress(1.0)
        return out
    finally:
        system.close()


def _plain(value: Any) -> Any:
    import msgspec

    return msgspec.to_builtins(value)
