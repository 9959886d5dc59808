"""A py-spy profile of one scheduled and one delivered timer, grouped by phase (docs/perf.md).

``bench.phase_costs`` times this code's own functions; this module also reads the
checkouts of older formats, whose functions have other names, so it samples instead:

    # in any checkout (format 1 is e027ce7), with py-spy installed (pip install py-spy)
    py-spy record -r 200 --format raw -o now.txt -- python /path/to/bench/spy_phases.py run 300000
    python -m bench.spy_phases group 300000 200 format1.txt now.txt

``run`` schedules ``count`` timers as ``bench.core_throughput`` does (batches of 1000,
200 B payloads) into a RocksDB store in a temporary directory, delivers them all with
``Engine.run_once``, and prints each phase's thread time per timer. ``group`` turns
py-spy's raw (collapsed) stacks into microseconds per timer for each group of
``GROUPS``, one column per file: samples / rate / count.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Sequence

# (phase, the frame that marks it, [(group, any of these frames on the stack)]): the first
# group that matches a stack takes its samples; "" matches every stack of the phase.
GROUPS: list[tuple[str, str, list[tuple[str, tuple[str, ...]]]]] = [
    (
        "schedule",
        "RocksTimerStore.schedule",
        [
            ("db.write", ("._write (", "RocksCore.write")),
            ("ids multi-get", ("multi_get",)),
            ("name checks", ("validate_idents", "validate_name")),
            ("keys, records, results, the batch", ("",)),
        ],
    ),
    (
        "deliver",
        "Engine.run_once",
        [
            ("due scan", ("RocksTimerStore.due",)),
            ("commit: db.write", ("._write (", "RocksCore.write")),
            ("commit: the rest", ("commit_delivered",)),
            ("engine: dispatcher, queue, lateness", ("",)),
        ],
    ),
]


def group_of(stack: str) -> tuple[str, str] | None:
    """(phase, group) of one collapsed stack, or None when it is in neither phase."""
    for phase, marker, groups in GROUPS:
        if marker in stack:
            for name, frames in groups:
                if any(frame in stack for frame in frames):
                    return phase, name
    return None


def group_samples(lines: Sequence[str], count: int, rate_hz: int) -> dict[tuple[str, str], float]:
    """Microseconds per timer of each (phase, group) in py-spy's raw output ``lines``."""
    out: dict[tuple[str, str], float] = {}
    for line in lines:
        stack, _, samples = line.rstrip("\n").rpartition(" ")
        where = group_of(stack) if samples.isdigit() else None
        if where is not None:
            out[where] = out.get(where, 0.0) + int(samples) / rate_hz * 1e6 / count
    return out


def table(columns: list[dict[tuple[str, str], float]]) -> list[str]:
    rows = []
    for phase, _marker, groups in GROUPS:
        for name, _frames in groups:
            cells = "  ".join(f"{c.get((phase, name), 0.0):7.2f}" for c in columns)
            rows.append(f"{phase:9s} {name:40s} {cells}")
        totals = "  ".join(
            f"{sum(v for (p, _), v in c.items() if p == phase):7.2f}" for c in columns
        )
        rows.append(f"{phase:9s} {'all':40s} {totals}")
    return rows


def run(count: int) -> None:
    """Schedule then deliver ``count`` timers with the checkout in the current directory."""
    if os.getcwd() not in sys.path:  # the checkout being measured, not this file's
        sys.path.insert(0, os.getcwd())
    from app.clock import FakeClock
    from app.engine import Engine, EngineSettings
    from bench.core_throughput import BATCH, START_MS, make_batches, open_rocks

    batches = make_batches(count)
    with tempfile.TemporaryDirectory(prefix="spy-phases-") as tmp:
        store = open_rocks(os.path.join(tmp, "store"))
        started = time.thread_time()
        for batch in batches:
            store.schedule(batch, START_MS)
        scheduled = time.thread_time()
        engine = Engine(store, FakeClock(START_MS), EngineSettings(scan_batch=BATCH))
        delivered = engine.run_once(START_MS + 10 * 3_600_000)
        finished = time.thread_time()
        store.close()
    if delivered != count:
        raise SystemExit(f"delivered {delivered} of {count}")
    per_timer = 1e6 / count
    print(
        f"schedule {(scheduled - started) * per_timer:.2f} us/timer, "
        f"deliver {(finished - scheduled) * per_timer:.2f} us/timer (thread time)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run_cmd = sub.add_parser("run", help="schedule and deliver COUNT timers (under py-spy)")
    run_cmd.add_argument("count", type=int)
    group_cmd = sub.add_parser("group", help="py-spy raw files -> us per timer per group")
    group_cmd.add_argument("count", type=int)
    group_cmd.add_argument("rate_hz", type=int)
    group_cmd.add_argument("files", nargs="+")
    args = parser.parse_args(argv)
    if args.command == "run":
        run(args.count)
        return 0
    columns = []
    for path in args.files:
        with open(path, encoding="utf-8") as f:
            columns.append(group_samples(f.readlines(), args.count, args.rate_hz))
    names = [os.path.splitext(os.path.basename(path))[0][:7] for path in args.files]
    print(f"{'':50s} " + "  ".join(f"{name:>7s}" for name in names))
    print("\n".join(table(columns)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
