"""The single schedule without HTTP: ``POST /v1/timers`` through the ASGI app in-process.

    python -m timerstore bench-single-inproc              # requests/s of process CPU
    python -m timerstore bench-single-inproc --profile    # and cProfile's top functions

The app comes from the composition root (``timerstore.cli`` hands ``api.app.create_app``
in): ``bench`` sits beside ``api`` and may not import it.
64 coroutines on one uvloop call the app (``api.app.create_app``, with its hot route,
group commit and a real RocksDB store in a temporary directory) with one pre-built scope
and body each time, as uvicorn would after parsing. What is left between this figure and
``bench.http_load --single``'s server-CPU rate is the HTTP layer (uvicorn's protocol,
the transport, the socket calls). Since 27 Nov the server answers the plain request in
its HTTP protocol without ASGI (``api.http_protocol``), so this measures the ASGI route
that answers every other single schedule (``api.hot_routes.HotRoutes``), not the path of
the plain one. cProfile slows the Python it counts several times, so
its table is where the time goes, not how much there is (docs/perf.md).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import pstats
import tempfile
import time
from collections.abc import Callable
from typing import Any

import uvloop

from app.config import Settings, load_settings

AppFactory = Callable[[Settings], Any]  # settings -> an ASGI app with a lifespan context

BODY = json.dumps({"topic": "load", "delay_ms": 3_600_000, "payload": "x" * 100}).encode()
HEADERS = [
    (b"host", b"127.0.0.1"),
    (b"content-length", str(len(BODY)).encode()),
    (b"content-type", b"application/json"),
]


def _scope() -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/timers",
        "raw_path": b"/v1/timers",
        "query_string": b"",
        "root_path": "",
        "headers": HEADERS,
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 2),
        "state": {},
    }


async def _post(app: Any) -> None:
    messages = [{"type": "http.request", "body": BODY, "more_body": False}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return messages.pop() if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(_scope(), receive, send)
    if sent[0]["status"] != 201:
        raise SystemExit(f"single_inproc: status {sent[0]['status']}: {sent[-1]}")


async def _run(
    create_app: AppFactory, requests: int, concurrency: int, profile: cProfile.Profile | None
) -> None:
    with tempfile.TemporaryDirectory(prefix="timerstore-inproc-") as data_dir:
        settings = load_settings(environ={}, overrides={"data_dir": data_dir})
        app = create_app(settings)
        async with app.router.lifespan_context(app):
            for _ in range(200):  # warm up
                await _post(app)

            async def client(count: int) -> None:
                for _ in range(count):
                    await _post(app)

            wall, cpu = time.perf_counter(), time.process_time()
            if profile is not None:
                profile.enable()
            await asyncio.gather(*(client(requests // concurrency) for _ in range(concurrency)))
            if profile is not None:
                profile.disable()
            done = requests // concurrency * concurrency
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            print(f"{done:,} single schedules: {done / wall:,.0f}/s wall, "
                  f"{done / cpu:,.0f}/s of process CPU")  # fmt: skip


def register(subparsers: Any, create_app: AppFactory) -> None:
    parser = subparsers.add_parser(
        "bench-single-inproc",
        help="single schedules through the ASGI app in-process (no HTTP)",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--profile", action="store_true", help="print cProfile's top 30")
    parser.set_defaults(handler=lambda args: run(args, create_app))


def run(args: argparse.Namespace, create_app: AppFactory) -> int:
    profile = cProfile.Profile() if args.profile else None
    uvloop.run(_run(create_app, args.requests, args.concurrency, profile))
    if profile is not None:
        pstats.Stats(profile).sort_stats("tottime").print_stats(30)
    return 0
