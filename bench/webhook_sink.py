"""The webhook sink on loopback: deliveries/s to a healthy receiver, and the lateness of
healthy topics while one route's receiver is down.

1. ``healthy``: N timers due now on one webhook route to a local receiver (the standard
   library's threading HTTP server on 127.0.0.1, answering 204); deliveries/s from the
   first due time to the last commit.
2. ``isolation``: three topics due over a few seconds, one on the embedded log, one on a
   healthy webhook and one on a webhook whose receiver hangs past the route's timeout;
   lateness (store commit time minus due time) p50/p99/max of the two healthy topics,
   with and without the dead route.

Run: ``python -m bench.webhook_sink [--timers 5000] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from app.clock import SystemClock
from app.engine import Engine, EngineSettings
from app.engine.routing_sink import RoutingSink, SenderFactory
from app.engine.webhook_sink import WEBHOOK_SINK, WebhookSender
from app.routing import Route, RouteTable, SinkSettings, check_route
from storage.protocol import NewTimer
from storage.rocks import RocksSettings, RocksTimerStore

SECRET = "bench-secret"


def start_receiver(hang_s: float = 0.0) -> tuple[ThreadingHTTPServer, str]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            if hang_s:
                time.sleep(hang_s)
            self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/hook"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Rig:
    """A rocks store in a temp dir and a running engine routing by its route table."""

    def __init__(self, directory: str) -> None:
        self.store = RocksTimerStore(RocksSettings(directory))
        self.settings = SinkSettings()
        self.routes = RouteTable(self.store.control)
        clock = SystemClock()
        senders: dict[str, SenderFactory] = {WEBHOOK_SINK: WebhookSender}
        sink = RoutingSink(self.routes, self.settings, clock, senders)
        engine_settings = EngineSettings(tick_ms=5, backoff_base_ms=1000)
        self.engine = Engine(self.store, clock, engine_settings, sink=sink)

    def hook(self, topic: str, url: str, timeout_ms: int = 5000) -> None:
        route = check_route(Route("webhook", url, SECRET, timeout_ms), self.settings)
        self.routes.put(topic, route, now_ms())

    def wait_delivered(self, n: int, timeout_s: float = 300) -> None:
        deadline = time.monotonic() + timeout_s
        while self.store.stats().delivered < n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"delivered {self.store.stats().delivered} of {n}")
            time.sleep(0.005)

    def close(self) -> None:
        self.engine.stop()
        self.store.close()


def healthy(n: int) -> dict[str, Any]:
    server, url = start_receiver()
    with tempfile.TemporaryDirectory() as tmp:
        rig = Rig(tmp)
        try:
            rig.hook("h", url)
            start = now_ms() + 200
            rig.store.schedule([NewTimer("h", f"t{i}", start) for i in range(n)], now_ms())
            rig.engine.start()
            rig.wait_delivered(n)
            seconds = (now_ms() - start) / 1000
        finally:
            rig.close()
            server.shutdown()
    return {"timers": n, "seconds": round(seconds, 3), "deliveries_per_s": round(n / seconds)}


def _percentiles(values: list[int]) -> dict[str, int]:
    values = sorted(values)
    return {
        "p50_ms": values[len(values) // 2],
        "p99_ms": values[min(len(values) - 1, int(len(values) * 0.99))],
        "max_ms": values[-1],
    }


def isolation(per_topic: int, spread_ms: int, dead_route: bool) -> dict[str, Any]:
    good, good_url = start_receiver()
    dead, dead_url = start_receiver(hang_s=30.0)
    with tempfile.TemporaryDirectory() as tmp:
        rig = Rig(tmp)
        try:
            rig.hook("hook-ok", good_url)
            rig.hook("hook-dead", dead_url, timeout_ms=2000)
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
            result = {}
            for topic in ("log-ok", "hook-ok"):
                late = []
                for i in range(per_topic):
                    view = rig.store.get(topic, f"{topic}-{i}")
                    assert view is not None and view.delivered_at_ms is not None
                    late.append(view.delivered_at_ms - view.requested_deliver_at_ms)
                result[topic] = _percentiles(late)
        finally:
            rig.close()
            good.shutdown()
            dead.shutdown()
    return {"dead_route": dead_route, "per_topic": per_topic, "spread_ms": spread_ms, **result}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timers", type=int, default=5000)
    parser.add_argument("--per-topic", type=int, default=2000)
    parser.add_argument("--spread-ms", type=int, default=4000)
    parser.add_argument("--json", default="")
    args = parser.parse_args(argv)
    report = {
        "healthy": healthy(args.timers),
        "isolation_without_dead_route": isolation(args.per_topic, args.spread_ms, False),
        "isolation_with_dead_route": isolation(args.per_topic, args.spread_ms, True),
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
