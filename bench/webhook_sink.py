"""The webhook sink on loopback: deliveries/s to a keep-alive receiver, and the lateness
at the receiver of a healthy route while another route's receiver is dead.

Every receiver is the standard library's threading HTTP server, keep-alive HTTP/1.1 with
a listen backlog of 1,024, in a process of its own (``bench.webhook_receiver``).

1. ``receiver_alone``: the healthy receiver alone, in the same run, before the sink:
   requests/s from a client process of its own over keep-alive connections, as many at a
   time as the route's ``sinks.concurrency``. The sink's rate is only meaningful below it.
2. ``healthy``: N timers due at once on one webhook route to that receiver;
   deliveries/s from the first due time to the last commit, this process's CPU time per
   delivery (the engine, the store and the sender; the receiver has its own process),
   and the connections the receiver accepted (keep-alive: at most ``sinks.concurrency``).
3. ``isolation``: ``--per-topic`` timers on each of three topics, due evenly over
   ``--spread-ms``: one on the embedded log, one on a healthy webhook and, in the second
   run, one on a webhook whose receiver hangs past the route's 2 s timeout (3 attempts,
   back-off 100 to 400 ms, as a user would set it). The healthy webhook's lateness is
   measured at its receiver (arrival less the due time: what its users see) and at the
   store's commit; the log topic's at the commit. ``deliveries_per_s`` is what the log and
   the healthy webhook are due at together (the dead route's timers are not counted).

Run: ``python -m bench.webhook_sink [--timers 5000] [--per-topic 1250] [--spread-ms 5000]
[--json out.json]``: 500 deliveries/s in total with a dead route beside them.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from typing import Any

from app.clock import SystemClock
from app.engine import Engine, EngineSettings
from app.engine.routing_sink import RoutingSink, SenderFactory
from app.engine.webhook_sink import WEBHOOK_SINK, WebhookSender
from app.routing import Route, RouteTable, SinkSettings, check_route
from bench.webhook_receiver import ReceiverProcess, load
from storage.protocol import NewTimer
from storage.rocks import RocksSettings, RocksTimerStore

SECRET = "bench-secret"
DEAD_TIMEOUT_MS = 2000
DEAD_HANG_S = 30.0


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Rig:
    """A rocks store in a temp dir and a running engine routing by its route table."""

    def __init__(self, directory: str) -> None:
        self.store = RocksTimerStore(RocksSettings(directory))
        self.settings = SinkSettings(stop_wait_ms=500)
        self.routes = RouteTable(self.store.control)
        clock = SystemClock()
        senders: dict[str, SenderFactory] = {WEBHOOK_SINK: WebhookSender}
        sink = RoutingSink(self.routes, self.settings, clock, senders)
        engine_settings = EngineSettings(tick_ms=5, backoff_base_ms=100, backoff_max_ms=400)
        self.engine = Engine(self.store, clock, engine_settings, sink=sink)

    def hook(self, topic: str, url: str, timeout_ms: int = 5000, max_attempts: int = 5) -> None:
        route = Route("webhook", url, SECRET, timeout_ms, max_attempts)
        self.routes.put(topic, check_route(route, self.settings), now_ms())

    def wait_delivered(self, n: int, timeout_s: float = 300) -> None:
        deadline = time.monotonic() + timeout_s
        while self.store.stats().delivered < n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"delivered {self.store.stats().delivered} of {n}")
            time.sleep(0.005)

    def lateness_at_commit(self, topic: str, ids: list[str]) -> list[int]:
        late = []
        for timer_id in ids:
            view = self.store.get(topic, timer_id)
            assert view is not None and view.delivered_at_ms is not None
            late.append(view.delivered_at_ms - view.requested_deliver_at_ms)
        return late

    def close(self) -> None:
        self.engine.stop()
        self.store.close()


def healthy(receiver: ReceiverProcess, n: int) -> dict[str, Any]:
    connections_before = receiver.report()["connections"]
    with tempfile.TemporaryDirectory() as tmp:
        rig = Rig(tmp)
        try:
            rig.hook("h", receiver.url)
            start = now_ms() + 200
            rig.store.schedule([NewTimer("h", f"t{i}", start) for i in range(n)], now_ms())
            cpu_s = time.process_time()
            rig.engine.start()
            rig.wait_delivered(n)
            seconds = (now_ms() - start) / 1000
            cpu_s = time.process_time() - cpu_s
        finally:
            rig.close()
    return {
        "timers": n,
        "seconds": round(seconds, 3),
        "deliveries_per_s": round(n / seconds),
        # this process's CPU (every thread: engine, store, sender) per delivery, the
        # receiver's not included: a rate a free core would allow, load aside
        "cpu_us_per_delivery": round(cpu_s * 1e6 / n),
        "receiver_connections": receiver.report()["connections"] - connections_before,
    }


def percentiles(values: list[int]) -> dict[str, int]:
    values = sorted(values)
    return {
        "p50_ms": values[len(values) // 2],
        "p99_ms": values[min(len(values) - 1, int(len(values) * 0.99))],
        "max_ms": values[-1],
    }


def isolation(per_topic: int, spread_ms: int, dead_route: bool) -> dict[str, Any]:
    with (
        ReceiverProcess() as good,
        ReceiverProcess(hang_s=DEAD_HANG_S) as dead,
        tempfile.TemporaryDirectory() as tmp,
    ):
        rig = Rig(tmp)
        try:
            rig.hook("hook-ok", good.url)
            rig.hook("hook-dead", dead.url, timeout_ms=DEAD_TIMEOUT_MS, max_attempts=3)
            topics = ["log-ok", "hook-ok"] + (["hook-dead"] if dead_route else [])
            start = now_ms() + 500
            timers = [
                NewTimer(topic, f"{topic}-{i}", start + i * spread_ms // per_topic)
                for topic in topics
                for i in range(per_topic)
            ]
            rig.store.schedule(timers, now_ms())
            rig.engine.start()
            rig.wait_delivered(2 * per_topic)
            ids = {topic: [f"{topic}-{i}" for i in range(per_topic)] for topic in topics}
            log_late = rig.lateness_at_commit("log-ok", ids["log-ok"])
            hook_late = rig.lateness_at_commit("hook-ok", ids["hook-ok"])
        finally:
            rig.close()
        at_receiver = good.report()["late_ms"]["hook-ok"]
    return {
        "dead_route": dead_route,
        "per_topic": per_topic,
        "spread_ms": spread_ms,
        "deliveries_per_s": round(2 * per_topic * 1000 / spread_ms),
        "log-ok": percentiles(log_late),
        "hook-ok": percentiles(hook_late),
        "hook-ok_at_receiver": percentiles(at_receiver),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timers", type=int, default=5000)
    parser.add_argument("--per-topic", type=int, default=1250)
    parser.add_argument("--spread-ms", type=int, default=5000)
    parser.add_argument("--json", default="")
    args = parser.parse_args(argv)
    with ReceiverProcess() as receiver:
        alone = load(receiver.url, max(args.timers, 1000), SinkSettings().concurrency)
        report = {
            "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            "receiver_alone": alone,
            "healthy": healthy(receiver, args.timers),
        }
    report["isolation_without_dead_route"] = isolation(args.per_topic, args.spread_ms, False)
    report["isolation_with_dead_route"] = isolation(args.per_topic, args.spread_ms, True)
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
