"""Scenario 9, tombstones: does the due scan stay cheap after many deliveries?

The first empty scan of a phase is reported, and the median of five more beside it
(``empty_scan_again_ms``): after a restart the first scan may pay once for what
housekeeping has not compacted yet; later ticks must not.

Delivered timers are deleted at the low end of the key space; a scan that starts at the
first key wades through their tombstones until compaction. Probes at each phase: an
empty due scan (nothing due: pure overhead) and delivering ``tombstone_probe`` due
timers, timed, with RocksDB's ``rocksdb.number.iter.skip`` ticker (entries the
iterators stepped over) where the store has it; and a point read of the oldest delivered
identity and a topic-log read from offset 0, with the data blocks each touched. Phases:
fresh; after D deliveries; after a restart (the scan starts at the persisted watermark);
after ``housekeep`` (watermark advance, range delete, compaction), in process and after
another restart.
"""

from __future__ import annotations

import time
from typing import Any

from bench.measure import now_ms
from bench.scenarios.common import Column, Context, fixed, timers
from bench.systems import BenchSystem, Skip, SystemSpec
from bench.systems.base import TOPIC
from bench.systems.engine_system import EngineSystem
from storage.rocks import RocksTimerStore

KEY = "tombstones"
NUMBER = 9
TITLE = "Tombstones: due-scan cost after many deliveries"
PAYLOAD = 100
CHUNK = 50_000
SKIP = "rocksdb.number.iter.skip"
BLOCKS = ("rocksdb.block.cache.data.miss", "rocksdb.block.cache.data.hit")
# RocksDB's background jobs read blocks too and the tickers are process-wide: the read
# probes wait (bounded) until no flush or compaction runs or is pending
BACKGROUND = (
    "rocksdb.num-running-compactions",
    "rocksdb.num-running-flushes",
    "rocksdb.compaction-pending",
)
QUIET_TIMEOUT_S = 300.0
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
    for phase in PHASES:
        cols.append(Column(f"phases.{phase}.get_blocks", f"get blocks {phase}", better="lower"))
    for phase in PHASES:
        cols.append(
            Column(f"phases.{phase}.log_read_blocks", f"log read blocks {phase}", better="lower")
        )
    cols.append(Column("phases.restarted.empty_scan_again_ms", "later scans restarted", "ms"))
    cols.append(Column("phases.restarted.iter_skip_again", "skipped later restarted"))
    cols.append(Column("housekeep_s", "housekeep", "s", better="lower"))
    return cols


class Prober:
    """Probes on a simulated clock that only moves forward.

    ``lag_ms`` is how long after a timer's due time a store can hand it out: 0 for
    RocksDB and the heap; a wheel reads a slot once its last millisecond has come.
    """

    def __init__(self, system: BenchSystem, ctx: Context, clock_ms: int, lag_ms: int) -> None:
        self.system, self.ctx, self.clock_ms, self.lag_ms = system, ctx, clock_ms, lag_ms
        self.seq = 0

    def skip(self) -> int | None:
        return self.system.ticker(SKIP) if isinstance(self.system, EngineSystem) else None

    def blocks(self) -> int | None:
        if not isinstance(self.system, EngineSystem):
            return None
        counts = [self.system.ticker(name) for name in BLOCKS]
        return None if None in counts else sum(c for c in counts if c is not None)

    def reads(self) -> dict[str, Any]:
        """A point read of the oldest delivered identity and a topic-log read from offset 0:
        the reads that sit under the most range tombstones and overwritten identities."""
        s = self.system
        if not isinstance(s, EngineSystem):
            return {}
        out: dict[str, Any] = {"background_wait_s": _wait_quiet(s.store)}
        for name, read in (
            ("get", lambda: s.store.get(TOPIC, "d0")),
            ("log_read", lambda: s.store.read_log(TOPIC, 0, 10)),
        ):
            skip0, blocks0 = self.skip(), self.blocks()
            started = time.perf_counter()
            read()
            out[f"{name}_ms"] = (time.perf_counter() - started) * 1000
            skip1, blocks1 = self.skip(), self.blocks()
            out[f"{name}_iter_skip"] = None if skip0 is None or skip1 is None else skip1 - skip0
            out[f"{name}_blocks"] = (
                None if blocks0 is None or blocks1 is None else blocks1 - blocks0
            )
        return out

    def deliver_at(self, due_ms: int, count: int, prefix: str, start: int) -> None:
        """Schedule ``count`` timers due at ``due_ms`` and deliver them all."""
        s = self.system
        before = s.delivered()
        s.schedule(timers(prefix, start, count, fixed(due_ms), PAYLOAD, self.ctx.rng), due_ms)
        self.clock_ms = due_ms + self.lag_ms
        while s.delivered() - before < count and s.run_due(self.clock_ms):
            pass
        if s.delivered() - before < count:
            raise RuntimeError(f"only {s.delivered() - before} of {count} timers were delivered")

    def probe(self) -> dict[str, Any]:
        t = self.clock_ms + 1
        skip0 = self.skip()
        empty_ms = self.empty_scan_ms(t)
        skip1 = self.skip()
        again_ms = sorted(self.empty_scan_ms(t) for _ in range(REPEAT))[REPEAT // 2]
        skip_again = self.skip()
        started = time.perf_counter()
        p = self.ctx.sizes.tombstone_probe
        self.deliver_at(t + 1, p, "p", self.seq)
        self.seq += p
        deliver_ms = (time.perf_counter() - started) * 1000
        skip2 = self.skip()
        return {
            "empty_scan_ms": empty_ms,
            "empty_scan_again_ms": again_ms,
            "probe_deliver_ms": deliver_ms,
            "iter_skip": None if skip0 is None or skip1 is None else skip1 - skip0,
            "iter_skip_again": None if skip1 is None or skip_again is None else skip_again - skip1,
            "iter_skip_probe": None if skip_again is None or skip2 is None else skip2 - skip_again,
            **self.reads(),
        }

    def empty_scan_ms(self, t: int) -> float:
        """One due scan with nothing due: what every idle tick pays."""
        s = self.system
        started = time.perf_counter()
        if isinstance(s, EngineSystem):
            found = s.store.due(t, 1000)
            elapsed = time.perf_counter() - started
            if found:  # not expected; hand them back rather than strand them in flight
                s.store.release(found)
        else:
            s.run_due(t)
            elapsed = time.perf_counter() - started
        return elapsed * 1000


def run(spec: SystemSpec, ctx: Context) -> dict[str, Any]:
    if not spec.sim_clock:
        raise Skip("needs a simulated clock to deliver millions without waiting")
    d = ctx.sizes.tombstone_deliveries
    system = ctx.open(spec, simulated=True, statistics=spec.family == "rocks")
    lag_ms = spec.precision_ms or 0
    prober = Prober(system, ctx, now_ms(), lag_ms)
    out: dict[str, Any] = {"deliveries": d, "phases": {}}
    phases = out["phases"]
    try:
        phases["fresh"] = prober.probe()
        done = 0
        started = time.perf_counter()
        while done < d:
            count = min(CHUNK, d - done)
            prober.deliver_at(prober.clock_ms + 1, count, "d", done)
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
        out["pending_end"] = system.pending()
        out["counters"] = system.counters()
        ctx.progress(1.0)
        return out
    finally:
        system.close()


def _wait_quiet(store: Any) -> float | None:
    """Seconds until the RocksDB store has no background job (None: not a RocksDB store)."""
    if not isinstance(store, RocksTimerStore):
        return None
    started = time.perf_counter()
    families = store.handles.cfs.values()
    while time.perf_counter() - started < QUIET_TIMEOUT_S:
        if not any(cf.property_int_value(p) for cf in families for p in BACKGROUND):
            break
        time.sleep(0.1)
    return time.perf_counter() - started


def _plain(value: Any) -> Any:
    import msgspec

    return msgspec.to_builtins(value)
