"""``python -m bench.http_load --single``: single requests against ``/healthz`` in one run.

Issue 36 part 3: single ``POST /v1/timers`` (JSON, server-made ids) per second and its
p99, beside ``GET /healthz`` (the floor of the HTTP stack) and a ``GET`` of an unknown
timer, in alternating rounds on the same server, so that the ratio to ``/healthz`` is
comparable across the minutes of a shared machine. The hour's speed is
``sum(range(10**6))`` in milliseconds, taken before and after the rounds; the figure
normalized to a fast hour (16 ms, docs/perf.md) is the rate times ``hour_ms / 16``.
The client is ``bench.http_drive`` (asyncio, keep-alive connections, as wrk does).
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from bench.http_drive import Run, drive, request_bytes

FAST_HOUR_MS = 16.0  # sum(range(10**6)) on a fast hour of this machine (issue 36)
TARGET_PER_S = 5_000  # single schedules a second on one core, normalized to a fast hour
HOUR_MS = 3_600_000


@dataclass
class SingleFigure:
    name: str
    per_s: float  # the median round
    p50_ms: float
    p99_ms: float
    rounds_per_s: list[float] = field(default_factory=list)
    # requests per second of the server process's CPU time (user + system, every thread):
    # the rate one core would give it alone; None when the server's pid is not known
    per_cpu_s: float | None = None


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (Linux /proc), every thread."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def hour_speed_ms(clock: Callable[[], float] = time.perf_counter) -> float:
    """``sum(range(10**6))`` in ms, the best of three: how fast this minute runs Python.

    By the wall clock (the issue's figure) or by ``time.thread_time``: on a machine whose
    run queue is longer than its cores, the wall time also counts the waits for a core,
    which the server's CPU-time rate does not; the CPU time is what normalizes it."""
    best = float("inf")
    for _ in range(3):
        started = clock()
        sum(range(10**6))
        best = min(best, clock() - started)
    return best * 1000


def hour_speeds() -> dict[str, float]:
    return {"wall_ms": hour_speed_ms(), "cpu_ms": hour_speed_ms(time.thread_time)}


def _requests() -> dict[str, bytes]:
    body = json.dumps({"topic": "load", "delay_ms": HOUR_MS, "payload": "x" * 100}).encode()
    return {
        "GET /healthz": request_bytes("GET", "/healthz"),
        "POST /v1/timers": request_bytes("POST", "/v1/timers", body, "application/json"),
        "GET /v1/timers (unknown)": request_bytes("GET", "/v1/timers/load/unknown-id"),
    }


def _expect_2xx(name: str, run: Run) -> Run:
    if run.bad_status and name.endswith("(unknown)") and run.first_bad == "HTTP status 404":
        return run  # the unknown timer's 404 is its answer
    if run.bad_status:
        raise SystemExit(f"http_load --single: {name}: {run.first_bad}; no rate computed")
    return run


def single_figures(
    url: str, connections: int, seconds: float, rounds: int, server_pid: int | None = None
) -> tuple[list[SingleFigure], dict[str, float]]:
    """Alternating rounds of each request; per request, the median round's rate and the
    percentiles over every round's latencies, and (with ``server_pid``) requests per
    second of server CPU over all its rounds. Also the hour's speed before and after."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    hour = {f"before_{k}": v for k, v in hour_speeds().items()}
    runs: dict[str, list[Run]] = {name: [] for name in _requests()}
    cpu_s = dict.fromkeys(runs, 0.0)
    for _ in range(rounds):
        for name, request in _requests().items():
            cpu_before = process_cpu_s(server_pid) if server_pid else 0.0
            run = drive(host, port, request, connections, seconds, stop_on_bad=_stops(name))
            cpu_s[name] += (process_cpu_s(server_pid) if server_pid else 0.0) - cpu_before
            runs[name].append(_expect_2xx(name, run))
    hour.update({f"after_{k}": v for k, v in hour_speeds().items()})
    figures = []
    for name, done in runs.items():
        merged = Run(0, 0.0, [lat for r in done for lat in r.latencies_s], 0, "")
        rates = [r.per_s for r in done]
        requests = sum(r.requests for r in done)
        figures.append(
            SingleFigure(
                name,
                statistics.median(rates),
                merged.percentile_ms(0.50),
                merged.percentile_ms(0.99),
                [round(r) for r in rates],
                requests / cpu_s[name] if cpu_s[name] else None,
            )
        )
    return figures, hour


def _stops(name: str) -> bool:
    return not name.endswith("(unknown)")


def report(figures: list[SingleFigure], hour: dict[str, float]) -> dict[str, object]:
    """Print the figures; the result's fields for the JSON file."""
    health = next(f for f in figures if f.name == "GET /healthz").per_s
    post = next(f for f in figures if f.name == "POST /v1/timers")
    # the faster of before and after: the conservative normalization
    wall_ms = min(hour["before_wall_ms"], hour["after_wall_ms"])
    cpu_ms = min(hour["before_cpu_ms"], hour["after_cpu_ms"])
    normalized = post.per_s * wall_ms / FAST_HOUR_MS
    one_core = (post.per_cpu_s or 0.0) * cpu_ms / FAST_HOUR_MS
    for f in figures:
        rounds = ", ".join(f"{r:,.0f}" for r in f.rounds_per_s)
        cpu = f"  {f.per_cpu_s:>6,.0f}/s of server CPU" if f.per_cpu_s else ""
        print(f"{f.name:26s} {f.per_s:>7,.0f}/s  p50 {f.p50_ms:5.1f} ms  p99 {f.p99_ms:6.1f} ms"
              f"  {f.per_s / health:4.2f} of /healthz{cpu}  rounds {rounds}")  # fmt: skip
    print(f"hour: sum(range(10**6)) {hour['before_wall_ms']:.1f} / {hour['after_wall_ms']:.1f} "
          f"ms wall, {hour['before_cpu_ms']:.1f} / {hour['after_cpu_ms']:.1f} ms CPU (before / "
          f"after); a fast hour is {FAST_HOUR_MS:.0f} ms")  # fmt: skip
    print(f"POST normalized to a fast hour: {normalized:,.0f}/s by the wall clock, "
          f"{one_core:,.0f}/s on one core (server CPU; target {TARGET_PER_S:,}/s)")  # fmt: skip
    return {
        "single": [asdict(f) for f in figures],
        "hour": hour,
        "post_to_healthz": post.per_s / health,
        "post_normalized_per_s": normalized,
        "post_one_core_normalized_per_s": one_core or None,
        "target_per_s": TARGET_PER_S,
    }
