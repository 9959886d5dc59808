"""Runs the chosen scenarios against every chosen system and collects every figure."""

from __future__ import annotations

import datetime as dt
import logging
import os
import shutil
import subprocess
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from bench.measure import io_write_bytes, machine_info, versions
from bench.scenarios.common import Context
from bench.sizes import Sizes
from bench.systems import Skip, SystemSpec
from bench.systems.base import dir_bytes

log = logging.getLogger(__name__)
ProgressFn = Callable[[str, str, float], None]


def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def run_one(module: ModuleType, spec: SystemSpec, ctx: Context) -> dict[str, Any]:
    """One scenario on one system: its figures, or why it was skipped, and its disk use."""
    if spec.unavailable:
        return {"status": "unavailable", "reason": spec.unavailable}
    io0 = io_write_bytes()
    started = time.perf_counter()
    try:
        figures = module.run(spec, ctx)
    except Skip as exc:
        return {"status": "skipped", "reason": str(exc)}
    except Exception as exc:  # one failing system must not sink the run: report it
        log.debug("scenario %s on %s failed", module.KEY, spec.name, exc_info=True)
        return {
            "status": "error",
            "reason": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc(),
        }
    elapsed = time.perf_counter() - started
    # throwaway work inside the scenario (the burst's calibration) is not its disk writes
    written = io_write_bytes() - io0 - int(figures.get("io_write_bytes_excluded") or 0)
    on_disk = dir_bytes(ctx.workdir)
    payload = sum(s.payload_bytes for s in ctx.opened)
    pending = figures.get("pending_end")
    if pending is None:
        pending = _pending_of(figures)
    return {
        "status": "ok",
        "elapsed_s": elapsed,
        "figures": figures,
        "disk": {
            "bytes_on_disk": on_disk,
            "pending": pending,
            "bytes_per_pending": on_disk / pending if pending else None,
            "io_write_bytes": written,
            "payload_bytes": payload,
            "write_amplification": written / payload if payload else None,
        },
    }


def _pending_of(figures: dict[str, Any]) -> int | None:
    variants = figures.get("variants")
    if isinstance(variants, dict):
        return sum(int(v.get("pending_end") or 0) for v in variants.values()) or None
    stats = (figures.get("counters") or {}).get("stats") or {}
    return stats.get("pending")


@dataclass(frozen=True)
class _Run:
    """What every scenario-on-system step of one run shares: sizes, places, display."""

    sizes: Sizes
    data_dir: str
    keep_data: bool
    console: Console
    progress: Progress
    overall: TaskID


def run_bench(
    scenarios: list[ModuleType],
    specs: list[SystemSpec],
    sizes: Sizes,
    out_dir: str,
    *,
    keep_data: bool = False,
    quiet: bool = False,
    argv: list[str] | None = None,
) -> dict[str, Any]:
    data_dir = os.path.join(out_dir, "data")
    results: dict[str, Any] = {
        "meta": _meta(specs, sizes, data_dir, argv),
        "scenarios": {},
    }
    total = len(scenarios) * len(specs)
    console = Console(stderr=True, quiet=quiet)
    with Progress(*_progress_columns(), console=console, disable=quiet) as progress:
        overall = progress.add_task("all scenarios", total=total)
        run = _Run(sizes, data_dir, keep_data, console, progress, overall)
        for module in scenarios:
            entry = _scenario_entry(module)
            results["scenarios"][module.KEY] = entry
            for spec in specs:
                entry["systems"][spec.name] = _run_with_progress(run, module, spec)
    if not keep_data:
        shutil.rmtree(data_dir, ignore_errors=True)
    results["meta"]["finished_utc"] = _utc_now()
    return results


def _utc_now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def _meta(
    specs: list[SystemSpec], sizes: Sizes, data_dir: str, argv: list[str] | None
) -> dict[str, Any]:
    """The run's description: when, how big, on what machine and code, which systems."""
    return {
        "started_utc": _utc_now(),
        "mode": sizes.name,
        "argv": argv or [],
        "sizes": sizes.to_json(),
        "machine": machine_info(),
        "versions": versions(),
        "git_commit": git_commit(),
        "systems": [_system_meta(s) for s in specs],
        "settings": {
            "engine": "EngineSettings defaults (tick 10 ms, scan batch 1000, queue 100,000)",
            "rocks": "RocksSettings defaults (WAL on, no fsync per write, 64 MB cache)",
            "blob_min_bytes": sizes.growth_blob_min_bytes,
            "workdir": data_dir,
        },
    }


def _system_meta(spec: SystemSpec) -> dict[str, Any]:
    return {
        "name": spec.name,
        "family": spec.family,
        "description": spec.description,
        "durable": spec.durable,
        "durability": spec.durability,
        "max_timers": spec.max_timers,
        "scale": spec.scale,
        "available": spec.unavailable is None,
        "reason": spec.unavailable,
    }


def _progress_columns() -> tuple[ProgressColumn, ...]:
    return (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeElapsedColumn(),
    )


def _scenario_entry(module: ModuleType) -> dict[str, Any]:
    """A scenario's place in the results; ``systems`` is filled as each system runs."""
    return {
        "number": module.NUMBER,
        "title": module.TITLE,
        "doc": (module.__doc__ or "").strip(),
        "systems": {},
    }


def _run_with_progress(run: _Run, module: ModuleType, spec: SystemSpec) -> dict[str, Any]:
    """``run_one`` under its own progress bar; its data removed afterwards unless kept."""
    progress = run.progress
    label = f"{module.NUMBER}. {module.KEY} · {spec.name}"
    task = progress.add_task(label, total=1.0)
    workdir = os.path.join(run.data_dir, module.KEY, spec.name)

    def tick(fraction: float) -> None:
        if fraction:
            progress.update(task, completed=min(1.0, fraction))

    result = run_one(module, spec, Context(run.sizes, workdir, tick))
    status = result["status"]
    progress.update(task, completed=1.0, description=f"{label} [{status}]")
    progress.advance(run.overall)
    if status == "error":
        run.console.print(result["traceback"])
    if not run.keep_data:
        shutil.rmtree(workdir, ignore_errors=True)
    progress.remove_task(task)
    run.console.log(f"{label}: {status}")
    return result
