"""Scenario 6, growth: enqueue rate as the store grows from 0 to many pending timers.

Timers due at random times over 30 days (unsorted keys: RocksDB must sort and compact
them) are scheduled in windows; each window's rate is recorded with the pending count
at its end. The figure is the rate near the end against the rate at the start (median
of the first and of the last three windows); beside it the same ratio in the
scheduling thread's CPU time, which leaves out waiting for a core and write stalls (for
a peer it is the client's share only). The same thread's CPU time making each window's
timers, work that is identical at every size, gives the writing core's own speed at the
end against the start (``made_end_vs_start``: it moves with the core, not with the
store's work), and the end/start at the start's core speed
(``end_vs_start_same_core``). For the RocksDB store the same runs again
with BlobDB (key-value separation, ``blob_min_bytes``), and read cost is measured on
the grown store with and without it: a due scan (timers/s through ``due``; RocksDB
only, a wheel reads one slot at a time) and random point reads (``get``/s, every store).
After each plain RocksDB variant the same timers are grown again as plain RocksDB puts
of the store's keys and records (``raw_puts``, the yardstick the schedule and the burst
are judged by), so the store's fall can be read beside RocksDB's own at that size on the
same machine in the same run (``raw_puts.end_vs_start``, ``end_vs_raw_end``).
Memory per pending timer: RSS growth over the run (the server's for a peer, this
process's otherwise) / pending timers at the end.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from bench.measure import core_shares, io_write_bytes, now_ms, rss_bytes, thread_clock
from bench.scenarios import at_size
from bench.scenarios.common import Column, Context, chunks, timers
from bench.systems import SystemSpec
from bench.systems.base import TOPIC, BenchSystem, BenchTimer, dir_bytes
from bench.systems.engine_system import EngineSystem
from bench.systems.peer import PeerSystem
from bench.systems.raw_puts import RawPutsSystem

KEY = "growth"
NUMBER = 6
TITLE = "Growth: enqueue rate as pending timers grow"
DAY_MS = 24 * 3600 * 1000
SLICE = 200_000  # timers made at once (not timed)


def variants(ctx: Context, spec: SystemSpec) -> list[tuple[str, int, bool]]:
    sizes = ctx.sizes.growth_payloads or tuple(ctx.sizes.growth_targets)
    out = [(f"p{p}", p, False) for p in sizes]
    if spec.family == "rocks" and ctx.sizes.growth_blob:
        out += [(f"p{p}_blob", p, True) for p in sizes]
    return out


def columns(ctx: Context) -> list[Column]:
    return [
        Column("pending_end", "pending"),
        Column("rate_start", "rate at 0", "/s", ratio=True),
        Column("rate_end", "rate at end", "/s", ratio=True),
        Column("end_vs_start", "end/start", "x"),
        Column("raw_puts.rate_end", "raw puts at end", "/s"),
        Column("raw_puts.end_vs_start", "raw puts end/start", "x"),
        Column("end_vs_raw_end", "end / raw puts' end", "x"),
        Column("cpu_end_vs_start", "end/start in CPU", "x"),
        Column("made_end_vs_start", "core speed end/start", "x"),
        Column("end_vs_start_same_core", "end/start at start's core speed", "x"),
        Column("memory_per_pending_b", "RSS / pending", "B", better="lower"),
        Column("rate_min", "min window", "/s"),
        Column("rate_max", "max window", "/s"),
        Column("scan_rate", "due scan", "/s", ratio=True),
        Column("get_rate", "get", "/s", ratio=True),
        Column("at_size.burst.lateness.p99_ms", "burst p99 at size", "ms", better="lower"),
        Column("at_size.burst.deliver_all_s", "burst all at size", "s", better="lower"),
        Column("at_size.steady.lateness.p99_ms", "steady p99 at size", "ms", better="lower"),
    ]


def table_rows(entry: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any] | None]]:
    """One row per system and variant; each ratio is against rocks' plain variant."""
    ok = {n: s["figures"]["variants"] for n, s in entry["systems"].items() if s["status"] == "ok"}
    base = ok.get("rocks", {})
    rows = []
    for name, found in ok.items():
        for variant, figures in found.items():
            plain = variant.removesuffix("_blob")
            is_base = name == "rocks" and variant == plain
            rows.append((f"{name} {variant}", figures, None if is_base else base.get(plain)))
    return rows


def _edge(rates: list[float], last: bool) -> float:
    k = 3 if len(rates) >= 6 else 1
    return statistics.median(rates[-k:] if last else rates[:k])


def _end_vs_start(rates: list[float]) -> float:
    return _edge(rates, last=True) / _edge(rates, last=False)


def read_cost(
    system: EngineSystem, ctx: Context, far_ms: int, ids: list[str], scan: bool
) -> dict[str, Any]:
    store = system.store
    scanned, started = 0, time.perf_counter()
    taken = []
    while scan and scanned < ctx.sizes.growth_read_scan:
        batch = store.due(far_ms, 1000)
        if not batch:
            break
        scanned += len(batch)
        taken.append(batch)
    scan_s = time.perf_counter() - started
    for batch in taken:
        store.release(batch)
    started = time.perf_counter()
    for tid in ids:
        store.get(TOPIC, tid)
    get_s = time.perf_counter() - started
    return {
        "scan_timers": scanned,
        "scan_rate": scanned / scan_s if scan else None,
        "get_rate": len(ids) / get_s if get_s else None,
    }


@dataclass(frozen=True)
class _Plan:
    """One variant's enqueue: ``windows`` windows of ``window_timers`` timers each."""

    payload_bytes: int
    windows: int
    window_timers: int
    start_ms: int
    share: tuple[int, int]  # (enqueues done, enqueues in all) for the progress fraction
    windows_path: str  # each finished window as a JSON line: what a run cut short leaves
    rng: random.Random  # due times and payloads: the raw puts get the store's very timers


def run_variant(
    spec: SystemSpec, ctx: Context, name: str, size: int, blob: bool, share: tuple[int, int]
) -> dict[str, Any]:
    """One variant grown to its size; then, for a plain RocksDB variant, the same timers
    as raw puts (``share``: enqueues done before it and in all, for the progress bar)."""
    s = ctx.sizes
    target = spec.size(s.growth_targets[size])
    window = max(1, target // s.growth_windows)
    os.makedirs(ctx.workdir, exist_ok=True)
    windows_path = os.path.join(ctx.workdir, f"{name}.windows.jsonl")
    raw_rng = random.Random()
    raw_rng.setstate(ctx.rng.getstate())  # the raw puts get the very timers the store got
    plan = _Plan(size, s.growth_windows, window, now_ms(), share, windows_path, ctx.rng)
    blob_min = s.growth_blob_min_bytes if blob else None
    system = ctx.open(
        spec,
        sub=name,
        simulated=spec.sim_clock,
        blob_min_bytes=blob_min,
        statistics=spec.family == "rocks",  # compaction byte tickers for claim 2
    )
    try:
        out = _grow(system, ctx, plan)
        out["blob_min_bytes"] = blob_min
        if isinstance(system, EngineSystem):
            out.update(_read_figures(system, spec, ctx, plan))
    finally:
        system.close()
    if isinstance(system, EngineSystem) and at_size.wanted(ctx, size, blob):
        out["at_size"] = at_size.measure(spec, ctx, name)
    if with_raw_puts(spec, blob):
        raw_path = os.path.join(ctx.workdir, f"raw-{name}.windows.jsonl")
        raw_share = (share[0] + 1, share[1])
        out["raw_puts"] = grow_raw_puts(
            ctx, replace(plan, share=raw_share, windows_path=raw_path, rng=raw_rng), name
        )
        out["end_vs_raw_end"] = out["rate_end"] / out["raw_puts"]["rate_end"]
    return out


def with_raw_puts(spec: SystemSpec, blob: bool) -> bool:
    """Whether a variant is grown again as raw puts: the RocksDB store's plain variants."""
    return spec.family == "rocks" and not blob


def _grow(system: BenchSystem, ctx: Context, plan: _Plan) -> dict[str, Any]:
    """The plan's windows on ``system``: rates, memory growth and core shares."""
    memory_before = memory_bytes(system)
    windows = _enqueue_windows(system, ctx, plan)
    pending = system.pending()
    memory_growth = memory_bytes(system) - memory_before
    return {
        "payload_bytes": plan.payload_bytes,
        "pending_end": pending,
        "memory_growth_mb": memory_growth / 2**20,
        "memory_per_pending_b": memory_growth / pending if pending else None,
        **_rate_figures(windows, plan),
        "core_shares": windows.shares,
    }


def grow_raw_puts(ctx: Context, plan: _Plan, name: str) -> dict[str, Any]:
    """The plan's timers as plain WriteBatches of the store's keys and records into a
    RocksDB of default options (``RawPutsSystem``), grown the same way; run after the
    store, so nothing it leaves in this process's memory counts in the store's figures,
    and removed at once (its disk is not the scenario's). Its disk writes are reported
    so the runner leaves them out of the store's (``io_write_bytes``)."""
    workdir = os.path.join(ctx.workdir, f"raw-{name}")
    io_before = io_write_bytes()
    raw = RawPutsSystem(f"raw-{name}", workdir, statistics=True)
    try:
        out = _grow(raw, ctx, plan)
        out["bytes_on_disk"] = dir_bytes(workdir)
        out["counters"] = raw.counters()
    finally:
        raw.close()
        shutil.rmtree(workdir, ignore_errors=True)
    out["io_write_bytes"] = io_write_bytes() - io_before
    return out


def memory_bytes(system: BenchSystem) -> int:
    """RSS that holds the pending timers: the server's for a peer, else this process's."""
    if isinstance(system, PeerSystem):
        return system.server_rss_bytes()
    return rss_bytes()


@dataclass
class _Windows:
    """Each window's figures, in order: the schedule's wall rate and CPU rate (timers per
    second of ``time.thread_time``), the CPU rate of making its timers (the same work in
    every window: the core's own speed), and the cores each thread name used."""

    rates: list[float] = field(default_factory=list)
    cpu_rates: list[float] = field(default_factory=list)
    made_cpu_rates: list[float] = field(default_factory=list)
    shares: list[dict[str, float] | None] = field(default_factory=list)


def _enqueue_windows(system: BenchSystem, ctx: Context, plan: _Plan) -> _Windows:
    """Schedules the plan's windows one after the other; each window's rate (timers/s),
    its rate per CPU second of this thread, and the cores each thread name of this
    process used over the window (``core_shares``: where RocksDB's compaction and flush
    threads took the machine's cores from the writer).

    A window's timers are made in slices of at most ``SLICE`` (a 100M run has windows of
    2.5M: made at once they would take GBs); only the schedule calls are timed. The CPU
    rate leaves out what the wall rate counts besides the schedule's own work: waiting
    for a core (other processes, RocksDB's background threads) and write stalls. Making
    the slices is timed apart in CPU time: Python work that does not change with the
    store's size, interleaved with the schedule on the same thread, so its rate follows
    the core's speed through the run."""
    out = _Windows()
    for w in range(plan.windows):
        clock = thread_clock()
        first = w * plan.window_timers
        elapsed = cpu_s = made_cpu_s = 0.0
        for start in range(first, first + plan.window_timers, SLICE):
            count = min(SLICE, first + plan.window_timers - start)
            made_from = time.thread_time()
            items = _make_slice(plan, start, count)
            made_cpu_s += time.thread_time() - made_from
            took_s, took_cpu_s = _timed_schedule(system, items, ctx.sizes.batch, plan.start_ms)
            elapsed += took_s
            cpu_s += took_cpu_s
        out.rates.append(plan.window_timers / elapsed)
        out.cpu_rates.append(plan.window_timers / max(cpu_s, 1e-9))
        out.made_cpu_rates.append(plan.window_timers / max(made_cpu_s, 1e-9))
        out.shares.append(core_shares(clock, thread_clock()))
        _note_window(plan, w, out)
        ctx.progress((plan.share[0] + (w + 1) / plan.windows) / plan.share[1])
    return out


def _make_slice(plan: _Plan, start: int, count: int) -> list[BenchTimer]:
    """``count`` timers from ``start``, due at random over 30 days from a day ahead."""
    rng = plan.rng
    return timers(
        "g",
        start,
        count,
        lambda _i: plan.start_ms + DAY_MS + rng.randrange(30 * DAY_MS),
        plan.payload_bytes,
        rng,
    )


def _timed_schedule(
    system: BenchSystem, items: list[BenchTimer], batch: int, now_ms_: int
) -> tuple[float, float]:
    """Wall and thread CPU seconds of scheduling ``items`` in batches of ``batch``. Raw
    puts are timed as the yardstick is everywhere: their keys and records are encoded
    first, and only the WriteBatch puts and writes count (the store's schedule encodes
    inside its call, and is timed with it)."""
    if isinstance(system, RawPutsSystem):
        pairs = [system.encode(part, now_ms_) for part in chunks(items, batch)]
        return _timed(system.write, pairs)
    return _timed(lambda part: system.schedule(part, now_ms_), list(chunks(items, batch)))


def _timed(call: Callable[[Any], None], parts: list[Any]) -> tuple[float, float]:
    """Wall and this thread's CPU seconds of ``call(part)`` for every part."""
    t0, cpu0 = time.perf_counter(), time.thread_time()
    for part in parts:
        call(part)
    return time.perf_counter() - t0, time.thread_time() - cpu0


def _note_window(plan: _Plan, w: int, windows: _Windows) -> None:
    """Append the window's figures to the plan's file (kept if the run is killed)."""
    line = {
        "window": w,
        "pending": (w + 1) * plan.window_timers,
        "rate": windows.rates[w],
        "cpu_rate": windows.cpu_rates[w],
        "made_cpu_rate": windows.made_cpu_rates[w],
        "core_shares": windows.shares[w],
        "at_ms": now_ms(),
    }
    with open(plan.windows_path, "a") as f:
        f.write(json.dumps(line) + "\n")


def _rate_figures(windows: _Windows, plan: _Plan) -> dict[str, Any]:
    """Each window's rate with the pending count at its end, and the end against the start
    (by the same rule in CPU time: what the schedule's own work did as the store grew).

    ``made_end_vs_start`` is the same rule applied to making the timers, which is the
    same work at every size: how fast the writing core itself ran at the end against the
    start. Dividing the wall end/start by it (``end_vs_start_same_core``) takes out only
    the core's own speed; waiting for a core and write stalls still count."""
    rates = windows.rates
    rate_start, rate_end = _edge(rates, last=False), _edge(rates, last=True)
    made = _end_vs_start(windows.made_cpu_rates)
    return {
        "window_timers": plan.window_timers,
        "rates": rates,
        "pending": [(w + 1) * plan.window_timers for w in range(plan.windows)],
        "rate_start": rate_start,
        "rate_end": rate_end,
        "rate_min": min(rates),
        "rate_max": max(rates),
        "end_vs_start": rate_end / rate_start,
        "cpu_rates": windows.cpu_rates,
        "cpu_end_vs_start": _end_vs_start(windows.cpu_rates),
        "made_cpu_rates": windows.made_cpu_rates,
        "made_end_vs_start": made,
        "end_vs_start_same_core": rate_end / rate_start / made,
    }


def _read_figures(
    system: EngineSystem, spec: SystemSpec, ctx: Context, plan: _Plan
) -> dict[str, Any]:
    """Read cost on the grown store (random gets, and a due scan for RocksDB), its counters."""
    ids = [
        f"g{ctx.rng.randrange(plan.window_timers * plan.windows)}"
        for _ in range(ctx.sizes.growth_read_gets)
    ]
    # a due scan 40 days ahead is one bounded range read for RocksDB; a wheel walks
    # every slot up to it (millions at 10 ms), which is not a read-cost figure
    scan = spec.family == "rocks"
    return {
        **read_cost(system, ctx, plan.start_ms + 40 * DAY_MS, ids, scan),
        "counters": system.counters(),
    }


def run(spec: SystemSpec, ctx: Context) -> dict[str, Any]:
    if spec.delivery_only:
        from bench.systems import Skip

        raise Skip("same enqueue path as its misfire-default twin (the policy acts on delivery)")
    todo = variants(ctx, spec)
    enqueues = [1 + with_raw_puts(spec, blob) for _name, _size, blob in todo]
    result: dict[str, Any] = {"variants": {}}
    for i, (name, size, blob) in enumerate(todo):
        share = (sum(enqueues[:i]), sum(enqueues))
        result["variants"][name] = run_variant(spec, ctx, name, size, blob, share)
    raw_io = [
        v["raw_puts"]["io_write_bytes"] for v in result["variants"].values() if "raw_puts" in v
    ]
    if raw_io:
        result["io_write_bytes_excluded"] = sum(raw_io)
    return result
