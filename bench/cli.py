"""``timerstore bench``: run the comparison and write ``<out>/<UTC timestamp>/``."""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import time
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.sizes import Sizes
    from bench.systems import SystemSpec

DEFAULT_OUT = os.path.join("bench", "results")
INDICATIVE = "(indicative only: not the full sizes)"


def _names(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    return [n.strip() for v in values for n in v.split(",") if n.strip()]


def _positive(text: str) -> int:
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "bench",
        help="run the comparison benchmark (RocksDB store vs wheel vs baselines)",
        description="Run the benchmark scenarios against every system; write JSON, Markdown, PNG.",
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--quick",
        dest="mode",
        action="store_const",
        const="quick",
        help="small sizes (the default): about 3 minutes on 2 idle cores for the in-process "
        "systems, minutes more for each peer family",
    )
    mode.add_argument(
        "--full",
        dest="mode",
        action="store_const",
        const="full",
        help="the issue's sizes (hours; run on a quiet machine)",
    )
    mode.add_argument(
        "--tiny", dest="mode", action="store_const", const="tiny", help=argparse.SUPPRESS
    )
    p.add_argument(
        "--scenario",
        action="append",
        metavar="NAME",
        help="scenario key or number, comma-separated or repeated (default: all)",
    )
    p.add_argument(
        "--stores",
        action="append",
        metavar="NAMES",
        help="systems or families: rocks,wheel,heap,aps,aps-sqlite,... (default: all)",
    )
    p.add_argument(
        "--growth-pending",
        type=_positive,
        metavar="N",
        help="take the growth scenario (200 B payloads) to N pending timers, e.g. 100000000 "
        "(hours at 100M; the disk needs about 270 B per timer with 200 B payloads, twice "
        "that while the raw puts of the same timers, grown after it for comparison, run)",
    )
    p.add_argument(
        "--growth-payloads",
        metavar="BYTES",
        help="the growth scenario's payload sizes to run, comma-separated, e.g. 200 "
        "(default: 200,4096)",
    )
    p.add_argument(
        "--growth-no-blob",
        action="store_true",
        help="leave out the growth scenario's BlobDB variants (the RocksDB store)",
    )
    p.add_argument(
        "--growth-at-size",
        action="store_true",
        help="after the 200 B growth variant, run the burst and the steady rate on the grown "
        "store (the RocksDB store and the wheel), e.g. with --growth-pending 100000000",
    )
    p.add_argument(
        "--tombstone-deliveries",
        type=_positive,
        metavar="N",
        help="deliver N timers in the tombstones scenario, e.g. 1000000 (the full size is "
        "10,000,000)",
    )
    p.add_argument("--out", default=DEFAULT_OUT, help=f"results root (default {DEFAULT_OUT})")
    p.add_argument("--keep-data", action="store_true", help="keep the stores' data directories")
    p.add_argument("--quiet", action="store_true", help="no live progress display")
    p.set_defaults(handler=handle, mode="quick", parser=p)


def handle(args: argparse.Namespace) -> int:
    from bench import charts, claims, peer_targets, report, targets
    from bench.runner import run_bench
    from bench.sizes import FULL

    started_s = time.monotonic()
    sizes = _sizes(args)
    chosen, specs = _selection(args)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    out_dir = os.path.join(args.out, stamp)
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as exc:  # before any scenario runs: a usage error, not a traceback
        args.parser.error(f"--out {args.out}: cannot create {out_dir}: {exc.strerror or exc}")
    argv = ["bench", f"--{args.mode}"]
    if args.scenario:
        argv += ["--scenario", ",".join(_names(args.scenario) or [])]
    if args.stores:
        argv += ["--stores", ",".join(_names(args.stores) or [])]
    if args.growth_pending:
        argv += ["--growth-pending", str(args.growth_pending)]
    if args.growth_payloads:
        argv += ["--growth-payloads", args.growth_payloads]
    argv += [flag for flag, on in _growth_flags(args) if on]
    if args.tombstone_deliveries:
        argv += ["--tombstone-deliveries", str(args.tombstone_deliveries)]
    results = run_bench(
        chosen, specs, sizes, out_dir, keep_data=args.keep_data, quiet=args.quiet, argv=argv
    )
    results["targets"] = targets.judge(results, FULL.to_json())
    results["claims"] = claims.judge(results)
    results["peer_targets"] = peer_targets.judge(results)
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(results, f, indent=1, default=str)
    names = charts.draw_all(results, chosen, sizes, out_dir)
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write(report.render(results, chosen, sizes, names))
    minutes, seconds = divmod(round(time.monotonic() - started_s), 60)
    print(f"results: {out_dir} (the run took {minutes} min {seconds} s)")
    for line in verdict_lines(results["targets"] + results["peer_targets"]):
        print(line)
    return 0


def _sizes(args: argparse.Namespace) -> Sizes:
    """The preset's sizes with the options that override one scenario's size."""
    from bench.sizes import PRESETS

    sizes = PRESETS[args.mode]
    if args.growth_pending:
        targets_ = {**sizes.growth_targets, 200: args.growth_pending}
        sizes = dataclasses.replace(sizes, growth_targets=targets_)
    if args.growth_payloads:
        sizes = dataclasses.replace(sizes, growth_payloads=_payloads(args, sizes))
    if args.growth_no_blob or args.growth_at_size:
        sizes = dataclasses.replace(
            sizes, growth_blob=not args.growth_no_blob, growth_at_size=args.growth_at_size
        )
    if args.tombstone_deliveries:
        sizes = dataclasses.replace(sizes, tombstone_deliveries=args.tombstone_deliveries)
    return sizes


def _growth_flags(args: argparse.Namespace) -> list[tuple[str, bool]]:
    return [("--growth-no-blob", args.growth_no_blob), ("--growth-at-size", args.growth_at_size)]


def _payloads(args: argparse.Namespace, sizes: Sizes) -> tuple[int, ...]:
    """``--growth-payloads``: sizes the growth scenario knows, else a usage error."""
    try:
        chosen = tuple(int(x) for x in args.growth_payloads.split(",") if x.strip())
    except ValueError:
        chosen = ()
    known = sorted(sizes.growth_targets)
    if not chosen or any(size not in sizes.growth_targets for size in chosen):
        args.parser.error(
            f"--growth-payloads {args.growth_payloads}: expected some of "
            + ",".join(str(k) for k in known)
        )
    return chosen


def _selection(args: argparse.Namespace) -> tuple[list[ModuleType], list[SystemSpec]]:
    """The scenarios and systems named; a bad name or an empty choice is a usage error
    (one line, exit 2), not a traceback nor a run that measures nothing."""
    from bench import scenarios, systems

    parser: argparse.ArgumentParser = args.parser
    try:
        chosen = scenarios.select(_names(args.scenario))
        specs = systems.select_specs(_names(args.stores))
    except ValueError as exc:
        parser.error(str(exc))
    if not chosen:
        parser.error(
            "--scenario selects no scenario to run (disk, 8, is measured after every one; "
            f"valid: {scenarios.valid_names()})"
        )
    return chosen, specs


def verdict_lines(targets: list[dict[str, Any]]) -> list[str]:
    """The console summary; a verdict on reduced sizes says it is only indicative."""
    from bench.report import value_text

    lines = []
    for t in targets:
        met = {True: "met", False: "NOT met", None: "not measured"}[t["met"]]
        note = "" if t["met"] is None or t["at_full_size"] else f" {INDICATIVE}"
        if t.get("note"):
            note += f" ({t['note']})"
        lines.append(f"  {met:13} {t['target']}: {value_text(t)}{note}")
    return lines


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.cli [--quick|--full] ...``: the same, without the other subcommands."""
    import sys

    parser = argparse.ArgumentParser(prog="timerstore")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["bench", *(sys.argv[1:] if argv is None else argv)])
    return int(args.handler(args))


if __name__ == "__main__":
    raise SystemExit(main())
