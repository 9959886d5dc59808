"""HTTP load benchmark (not a test): the real server over loopback.

Measures single-timer ``POST /v1/timers`` per second, and timers per second through
``POST /v1/timers/batch`` with ``--batch-size``-timer bodies (default 1,000) in JSON and
in msgpack: the median of ``--repeats`` rounds of ``--batches`` bodies (one round takes
about a second, short enough for a busy minute to move it). Target on a 2-core machine
(issue 9): 150,000 timers/s, JSON and msgpack.

It starts ``timerstore serve`` on a free 127.0.0.1 port with a fresh data directory
(or drives ``--url``), keeps one keep-alive connection per client thread, and lets the
server make the ids so every request schedules new timers (due in an hour: the engine
stays idle and the figures are the schedule path). Bodies are encoded before the clock
starts. Results are printed and written to ``bench/results/http_load-<time>.json``.

    .venv/bin/python -m bench.http_load                 # the real run (quiet machine)
    .venv/bin/python -m bench.http_load --quick         # a few seconds, small sizes
    .venv/bin/python -m bench.http_load --single        # single requests beside /healthz

``--single`` measures only single requests (``bench.http_single``): ``POST /v1/timers``,
``GET /healthz`` and a ``GET`` of an unknown timer in alternating rounds of
``--seconds`` over ``--connections`` keep-alive connections (64, as issue 36's wrk run).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import msgspec

from bench.http_single import report, single_figures

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
HOUR_MS = 3_600_000


@dataclass
class Figure:
    name: str
    requests: int
    timers: int
    seconds: float
    requests_per_s: float
    timers_per_s: float
    target_timers_per_s: int | None = None
    rounds_timers_per_s: list[float] = field(default_factory=list)  # the median is above


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(
    data_dir: str, settings: dict[str, str] | None = None, port: int | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """``timerstore serve`` on a loopback port (a free one unless given), ready;
    ``settings`` are extra ``TIMERSTORE_*`` variables (none of the caller's own are
    passed on)."""
    port = port or _free_port()
    cmd = [sys.executable, "-m", "timerstore", "serve", "--port", str(port), "--data-dir", data_dir]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIMERSTORE_")}
    env["TIMERSTORE_LOG_LEVEL"] = "warning"
    env.update(settings or {})
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env)
    for _ in range(600):  # up to 30 s
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            conn.request("GET", "/readyz")
            if conn.getresponse().status == 200:
                return proc, f"http://127.0.0.1:{port}"
        except OSError:
            pass
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("the server did not become ready")


BodyFor = Callable[[int], tuple[list[bytes], str]]  # a client's bodies, sent in turn


def shares(requests: int, clients: int) -> list[int]:
    """How many of ``requests`` each client thread of ``_drive`` sends."""
    return [requests // clients + (1 if i < requests % clients else 0) for i in range(clients)]


def _drive(url: str, clients: int, requests: int, body_for: BodyFor) -> float:
    """Send ``requests`` POSTs spread over ``clients`` threads; return the wall seconds.
    Client ``i`` sends the bodies ``body_for(i)`` in turn (``body_for(-1)``: the path).

    A rate is only worth printing when every request was answered 2xx: a client thread
    that fails (refused, reset, timed out, a non-2xx status) stops, records why in
    ``errors``, and the run ends with one line instead of a rate over requests never sent.
    """
    parts = urlsplit(url)
    errors: list[str] = []
    completed = [0] * clients  # 2xx responses per client thread

    def client(index: int, count: int, path: str) -> None:
        conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60)
        bodies, content_type = body_for(index)
        headers = {"Content-Type": content_type}
        try:
            for n in range(count):
                conn.request("POST", path, body=bodies[n % len(bodies)], headers=headers)
                response = conn.getresponse()
                response.read()
                if not 200 <= response.status < 300:
                    errors.append(f"HTTP status {response.status}")
                    return
                completed[index] += 1
        except (OSError, http.client.HTTPException) as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            conn.close()

    path = parts.path.rstrip("/") + body_for(-1)[1]  # (the bodies of -1 are not sent)
    share = shares(requests, clients)
    threads = [threading.Thread(target=client, args=(i, n, path)) for i, n in enumerate(share)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - started
    done = sum(completed)
    if errors or done != requests:
        why = errors[0] if errors else "a client thread stopped"
        raise SystemExit(
            f"http_load: {done:,} of {requests:,} requests to {url} completed ({why}); "
            "no rate computed"
        )
    return seconds


def single_posts(url: str, clients: int, requests: int) -> Figure:
    def body_for(i: int) -> tuple[list[bytes], str]:
        if i < 0:
            return [], "/v1/timers"
        body = {"topic": f"load-{i}", "delay_ms": HOUR_MS, "payload": "x" * 100}
        return [json.dumps(body).encode()], "application/json"

    seconds = _drive(url, clients, requests, body_for)
    return Figure("single POST /v1/timers (JSON)", requests, requests, seconds,
                  requests / seconds, requests / seconds)  # fmt: skip


def batch_posts(
    url: str, clients: int, batches: int, size: int, kind: str, repeats: int = 1
) -> Figure:
    """``repeats`` rounds of ``batches`` bodies; the figure is the median round."""

    def body_for(i: int) -> tuple[list[bytes], str]:
        if i < 0:
            return [], "/v1/timers/batch"
        timers = [
            {"topic": f"load-{i}", "delay_ms": HOUR_MS + j, "payload": "x" * 100}
            for j in range(size)
        ]
        return _encoded(kind, [{"timers": timers}])

    rounds = sorted(_drive(url, clients, batches, body_for) for _ in range(repeats))
    seconds = rounds[len(rounds) // 2]
    timers = batches * size
    target = 150_000  # issue 9: JSON and msgpack alike
    return Figure(f"POST /v1/timers/batch ({size} per body, {kind})", batches, timers, seconds,
                  batches / seconds, timers / seconds, target,
                  [round(timers / r) for r in reversed(rounds)])  # fmt: skip


def _encoded(kind: str, bodies: list[dict[str, Any]]) -> tuple[list[bytes], str]:
    if kind == "msgpack":
        return [msgspec.msgpack.encode(b) for b in bodies], "application/msgpack"
    return [msgspec.json.encode(b) for b in bodies], "application/json"


def batch_cancels(url: str, clients: int, batches: int, size: int, kind: str) -> Figure:
    """``batches`` bodies of ``size`` identities to ``POST /v1/timers/cancel``, each body
    its own pending timers (scheduled before the clock starts, with 100 B payloads), so
    every identity is removed: the figure is the cancel path, not the unknown one. Each
    answer is read whole; the count of removals is checked afterwards in ``/v1/stats``."""
    idents = [  # client i's bodies: _drive gives client i the same share of each run
        [[(f"cancel-{kind}-{i}", f"b{b}-{j}") for j in range(size)] for b in range(n)]
        for i, n in enumerate(shares(batches, clients))
    ]

    def schedules(i: int) -> tuple[list[bytes], str]:
        if i < 0:
            return [], "/v1/timers/batch"
        timers = [[{"topic": t, "id": d, "delay_ms": HOUR_MS, "payload": "x" * 100}
                   for t, d in body] for body in idents[i]]  # fmt: skip
        return _encoded(kind, [{"timers": body} for body in timers])

    def cancels(i: int) -> tuple[list[bytes], str]:
        if i < 0:
            return [], "/v1/timers/cancel"
        return _encoded(kind, [{"timers": [{"topic": t, "id": d} for t, d in body]}
                               for body in idents[i]])  # fmt: skip

    _drive(url, clients, batches, schedules)  # one body per cancel body, the same share
    before = _pending(url)
    seconds = _drive(url, clients, batches, cancels)
    removed = before - _pending(url)
    if removed != batches * size:
        raise SystemExit(f"http_load: {removed:,} of {batches * size:,} cancels removed a timer")
    return Figure(f"POST /v1/timers/cancel ({size} per body, {kind})", batches, removed,
                  seconds, batches / seconds, removed / seconds)  # fmt: skip


def _pending(url: str) -> int:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60)
    try:
        conn.request("GET", parts.path.rstrip("/") + "/v1/stats")
        return int(json.loads(conn.getresponse().read())["pending"])
    finally:
        conn.close()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="drive a running server instead of starting one")
    parser.add_argument("--clients", type=int, default=2, help="client threads (connections)")
    parser.add_argument(
        "--single-posts", type=int, default=5000, help="single-timer POSTs of the full run"
    )
    parser.add_argument(
        "--single", action="store_true", help="only single requests, beside /healthz"
    )
    parser.add_argument("--connections", type=int, default=64, help="--single: connections")
    parser.add_argument(
        "--server-pid", type=int, help="--single with --url: the server's pid, for its CPU time"
    )
    parser.add_argument("--seconds", type=float, default=3.0, help="--single: seconds a round")
    parser.add_argument("--batches", type=int, default=200, help="batch POSTs per format")
    parser.add_argument("--batch-size", type=int, default=1000, help="timers per batch body")
    parser.add_argument(
        "--repeats", type=int, default=3, help="rounds of --batches per format; the median"
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, for development")
    parser.add_argument("--out", help="result file (default bench/results/http_load-<t>.json)")
    args = parser.parse_args(argv)
    if args.quick:
        args.single_posts, args.batches, args.batch_size, args.repeats = 200, 10, 200, 1
        args.seconds = 0.5
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    proc = None
    with tempfile.TemporaryDirectory(prefix="timerstore-http-load-") as data_dir:
        url = args.url
        if url is None:
            proc, url = start_server(data_dir)
        try:
            if args.single:
                pid = proc.pid if proc is not None else args.server_pid
                singles, hour = single_figures(
                    url, args.connections, args.seconds, args.repeats, pid
                )
                write_json(args, argv, {"connections": args.connections, **report(singles, hour)})
                return 0
            figures = [single_posts(url, args.clients, args.single_posts)] + [
                batch_posts(url, args.clients, args.batches, args.batch_size, kind, args.repeats)
                for kind in ("json", "msgpack")
            ]
            figures += [
                batch_cancels(url, args.clients, args.batches, args.batch_size, kind)
                for kind in ("json", "msgpack")
            ]
        finally:
            if proc is not None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(60)
    for f in figures:
        print_figure(f)
    write_result(args, argv, figures)
    return 0


def print_figure(f: Figure) -> None:
    target = f"  (target {f.target_timers_per_s:,}/s)" if f.target_timers_per_s else ""
    rounds = f"  rounds {', '.join(f'{r:,.0f}' for r in f.rounds_timers_per_s)}"
    print(f"{f.name:48s} {f.timers_per_s:>12,.0f} timers/s  "
          f"{f.requests_per_s:>9,.1f} req/s{target}"
          f"{rounds if len(f.rounds_timers_per_s) > 1 else ''}")  # fmt: skip


def write_result(args: argparse.Namespace, argv: list[str] | None, figures: list[Figure]) -> None:
    fields = {"clients": args.clients, "batch_size": args.batch_size}
    write_json(args, argv, {**fields, "figures": [asdict(f) for f in figures]})


def write_json(args: argparse.Namespace, argv: list[str] | None, fields: dict[str, Any]) -> None:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = Path(args.out) if args.out else RESULTS / f"http_load-{stamp}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    result = {
        "command": "python -m bench.http_load " + " ".join(argv or sys.argv[1:]),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "quick": args.quick,
        "repeats": args.repeats,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        **fields,
    }
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    sys.exit(main())
