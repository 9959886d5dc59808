"""Soak (not a test): the real server under a mixed load for minutes, checked against a model.

``timerstore serve`` runs on a free 127.0.0.1 port with a fresh data directory and its
periodic jobs made frequent (housekeeping every 2 s: watermark, range deletes,
compaction, done retention of 60 s, log retention of 120 s). Against it, each in a
thread of its own and through the Python client (``client``):

- a producer schedules ``--rate`` timers a second (batches, and single POSTs) on three
  log topics and one webhook topic, due within ``--max-delay-ms`` (some past due);
- a mutator reschedules or cancels timers it scheduled a moment ago (a 409 when the
  timer is already in flight or delivered is a right answer; the model keeps the time
  the service acknowledged last);
- a reader inspects recent timers; a consumer group per log topic long-polls and commits;
- a webhook receiver on loopback checks each request's signature and refuses a share
  of them (``--hook-fail``), so deliveries retry with the durable back-off;
- a sampler reads the server's RSS and ``/v1/stats``.

Then the load stops, every acknowledged timer is awaited, and ``bench.soak_model`` says
what broke: a timer lost, delivered twice into the log, early, at a time not the last
acknowledged, a cancelled timer delivered, any 5xx; and the service's own counters must
match what was seen. RSS is reported over the run (first and last fifth).

    .venv/bin/python -m bench.soak --minutes 20          # the real run
    .venv/bin/python -m bench.soak --quick               # 15 seconds, for development

Results are printed and written to ``bench/results/soak-<time>.json``; the exit status
is 1 when a promise was broken.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

from bench.http_load import RESULTS, start_server
from bench.measure import now_ms
from bench.soak_load import HOOK_TOPIC, Load, start_receiver
from bench.soak_model import Model

SECRET = "soak-secret"
SETTINGS = {  # the periodic jobs made frequent, so a soak runs each many times
    "TIMERSTORE_LOG_LEVEL": "error",  # not a line per refused webhook attempt
    "TIMERSTORE_HOUSEKEEPING__INTERVAL_MS": "2000",
    "TIMERSTORE_HOUSEKEEPING__STATS_SNAPSHOT_INTERVAL_MS": "1000",
    "TIMERSTORE_ROCKS__DONE_RETENTION_MS": "60000",
    "TIMERSTORE_ROCKS__LOG_RETENTION_MS": "120000",
    "TIMERSTORE_ENGINE__BACKOFF_BASE_MS": "200",
    "TIMERSTORE_ENGINE__BACKOFF_MAX_MS": "2000",
}


@dataclass(frozen=True)
class SoakOptions:
    seconds: float
    rate: int  # timers scheduled per second
    batch: int  # timers per batch POST
    max_delay_ms: int
    hook_fail: float  # share of webhook requests the receiver refuses
    seed: int
    kill_every_s: float | None = None  # SIGKILL the service this often, and start it again
    settings: dict[str, str] = field(default_factory=dict)  # more TIMERSTORE_* for the service


class Service:
    """The ``timerstore serve`` process; ``crash`` kills it and starts it again on the
    same port and data directory."""

    def __init__(self, data_dir: str, settings: dict[str, str]) -> None:
        self.data_dir, self.settings = data_dir, settings
        self.proc, self.url = start_server(data_dir, settings)
        self.crashes = 0

    def crash(self) -> None:
        self.proc.kill()  # SIGKILL: no shutdown, no flush
        self.proc.wait(30)
        port = int(self.url.rsplit(":", 1)[1])
        self.proc, _ = start_server(self.data_dir, self.settings, port)
        self.crashes += 1

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


class Sampler:
    """The server's RSS and ``/v1/stats`` every ``every_s`` seconds, in a thread."""

    def __init__(self, service: Service, every_s: float = 2.0) -> None:
        self.service, self.url, self.every_s = service, service.url, every_s
        self.samples: list[dict[str, Any]] = []
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self.run, name="soak-sampler", daemon=True)

    def run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=10) as http:
            while not self.stop_event.wait(self.every_s):
                with contextlib.suppress(httpx.TransportError, psutil.Error):  # --kill-every
                    self.samples.append(self.sample(http))

    def sample(self, http: httpx.Client) -> dict[str, Any]:
        stats = http.get("/v1/stats").json()
        memory = memory_gauges(http.get("/metrics").text)
        return {
            **memory,
            "t_ms": now_ms(),
            "pid": self.service.proc.pid,
            "rss_mb": psutil.Process(self.service.proc.pid).memory_info().rss / (1 << 20),
            "pending": stats["pending"],
            "in_flight": stats["in_flight"],
            "queue_depth": stats["queue_depth"],
            "lateness_p99_ms": stats["lateness"]["p99_ms"],
        }

    def rss_summary(self) -> dict[str, float]:
        """Over the last process's samples (the only one, unless --kill-every)."""
        pid = self.service.proc.pid
        rss = [s["rss_mb"] for s in self.samples if s["pid"] == pid]
        if len(rss) < 5:
            return {"samples": len(rss)}
        fifth = len(rss) // 5
        first, last = statistics.median(rss[:fifth]), statistics.median(rss[-fifth:])
        return {"samples": len(rss), "first_fifth_mb": first, "last_fifth_mb": last,
                "max_mb": max(rss), "growth_mb": last - first}  # fmt: skip


ROCKS_MEMORY = ("memtable", "table_readers", "block_cache_usage")
MALLOC_STATES = ("in_use", "free")


def memory_gauges(metrics_text: str) -> dict[str, float]:
    """RocksDB's and glibc malloc's memory gauges from ``/metrics``, in MB
    (``memtable_mb``, ..., ``malloc_in_use_mb``, ``malloc_free_mb``)."""
    found = {}
    for line in metrics_text.splitlines():
        for name in ROCKS_MEMORY:
            if line.startswith(f"timerstore_rocksdb_{name}_bytes "):
                found[f"{name}_mb"] = float(line.split()[1]) / (1 << 20)
        for state in MALLOC_STATES:
            if line.startswith(f'timerstore_malloc_bytes{{state="{state}"}} '):
                found[f"malloc_{state}_mb"] = float(line.split()[1]) / (1 << 20)
    return found


def wait_for(done: Callable[[], bool], timeout_s: float, poll_s: float = 0.2) -> bool:
    """Poll ``done`` until it is true or ``timeout_s`` passed (a bounded loop)."""
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(poll_s)
    return True


def counters_agree(stats: dict[str, Any], model: Model) -> list[str]:
    """The service's own counters against what the load saw (a fresh data directory)."""
    seen = len({*model.logged, *model.hooked})
    cancelled = model.counts.get("cancel_cancelled", 0)
    cut_off = model.counts.get("cancel_cut_off", 0)  # a crash took the answer: either way
    wrong = []
    for name, low, high in (("pending", 0, 0), ("in_flight", 0, 0), ("dead_lettered", 0, 0),
                            ("delivered", seen, seen),
                            ("cancelled", cancelled, cancelled + cut_off)):  # fmt: skip
        if not low <= stats[name] <= high:
            want = f"{low}" if low == high else f"{low} to {high}"
            wrong.append(f"/v1/stats {name} = {stats[name]}, the load saw {want}")
    return wrong


def soak(options: SoakOptions, data_dir: str) -> dict[str, Any]:
    model = Model(frozenset({HOOK_TOPIC}))
    receiver, hook_url, hook_thread = start_receiver(SECRET, options.hook_fail, options.seed, model)
    service = Service(data_dir, {**SETTINGS, **options.settings})
    try:
        route = {"sink": "webhook", "url": hook_url, "secret": SECRET, "max_attempts": 20}
        httpx.put(f"{service.url}/v1/topics/{HOOK_TOPIC}/route", json=route).raise_for_status()
        return _run_load(options, service, model)
    finally:
        service.stop()
        receiver.shutdown()
        receiver.server_close()
        hook_thread.join(10)


def _run_load(options: SoakOptions, service: Service, model: Model) -> dict[str, Any]:
    url = service.url
    crashes = options.kill_every_s is not None
    load = Load(url, model, options.rate, options.batch, options.max_delay_ms, options.seed,
                crashes)  # fmt: skip
    sampler = Sampler(service)
    sampler.thread.start()
    started = time.monotonic()
    load.start()
    try:
        _crash_now_and_then(service, load, options.seconds, options.kill_every_s)
        load.stop_producing()
        drained = wait_for(lambda: model.outstanding() == 0, options.max_delay_ms / 1000 + 60)
        with httpx.Client(base_url=url, timeout=10) as http:
            settled = wait_for(lambda: _idle(http.get("/v1/stats").json()), 30)
            stats = http.get("/v1/stats").json()
        load.stop()
    finally:  # whatever went wrong, no load thread outlives the soak
        load.halt()
        sampler.stop_event.set()
        sampler.thread.join(30)
    result = model.check()
    wrong = counters_agree(stats, model) + model.not_cancelled(load.not_found)
    if wrong:
        result["violations"]["counters, 404s"] = wrong
        result["violation_count"] += len(wrong)
    return {**result, "drained": drained, "settled": settled, "crashes": service.crashes,
            "seconds": time.monotonic() - started, "rss": sampler.rss_summary(),
            "lateness_p99_ms_max": max((s["lateness_p99_ms"] or 0 for s in sampler.samples),
                                       default=None),
            "final_stats": {k: stats[k] for k in ("pending", "in_flight", "delivered",
                                                  "cancelled", "dead_lettered")},
            "samples": sampler.samples}  # fmt: skip


def _idle(stats: dict[str, Any]) -> bool:
    return bool(stats["pending"] == 0 and stats["in_flight"] == 0)


def _crash_now_and_then(
    service: Service, load: Load, seconds: float, kill_every_s: float | None
) -> None:
    """Let the load run ``seconds`` of the service's up time, killing the service every
    ``kill_every_s`` of it: the restarts do not count, so the number of crashes does not
    depend on how fast the machine restarts (a suite run on a loaded machine got one
    crash of two when they did)."""
    up_left_s = seconds
    while kill_every_s is not None and kill_every_s < up_left_s:
        time.sleep(kill_every_s)  # the load runs meanwhile
        up_left_s -= kill_every_s
        load.up.clear()
        service.crash()
        load.up.set()
    time.sleep(up_left_s)


def parse_args(argv: list[str] | None) -> tuple[SoakOptions, argparse.Namespace]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--minutes", type=float, default=20.0, help="how long the load runs (restarts not counted)"
    )
    parser.add_argument("--rate", type=int, default=2000, help="timers scheduled per second")
    parser.add_argument("--batch", type=int, default=200, help="timers per batch POST")
    parser.add_argument("--max-delay-ms", type=int, default=3000, help="timers due within")
    parser.add_argument("--hook-fail", type=float, default=0.05, help="refused webhook share")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--kill-every", type=float, help="SIGKILL the service every this many seconds"
    )
    parser.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a TIMERSTORE_* variable for the service (repeatable), over the soak's own",
    )
    parser.add_argument("--quick", action="store_true", help="15 seconds, for development")
    parser.add_argument("--out", help="result file (default bench/results/soak-<t>.json)")
    args = parser.parse_args(argv)
    seconds = 15.0 if args.quick else args.minutes * 60
    settings = dict(_setting(parser, text) for text in args.setting)
    options = SoakOptions(seconds, args.rate, args.batch, args.max_delay_ms, args.hook_fail,
                          args.seed, args.kill_every, settings)  # fmt: skip
    return options, args


def _setting(parser: argparse.ArgumentParser, text: str) -> tuple[str, str]:
    name, equals, value = text.partition("=")
    if not equals or not name.startswith("TIMERSTORE_"):
        parser.error(f"--setting takes TIMERSTORE_NAME=VALUE, got {text!r}")
    return name, value


def main(argv: list[str] | None = None) -> int:
    options, args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="timerstore-soak-") as data_dir:
        result = soak(options, data_dir)
    result["options"] = vars(options)
    print(json.dumps({k: v for k, v in result.items() if k not in ("samples", "options")},
                     indent=1))  # fmt: skip
    out = (
        Path(args.out)
        if args.out
        else RESULTS / f"soak-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(f"wrote {out}")
    return 1 if result["violation_count"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
