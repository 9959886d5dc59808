"""``timerstore serve``: the service under uvicorn, with a graceful stop.

First SIGTERM/SIGINT: the service refuses new /v1 work (503) and ends long-polls, uvicorn
stops listening and lets requests in progress finish (up to ``shutdown_grace_ms``), then
the lifespan stops the engine (queued batches commit) and closes the store.
After a graceful stop the process exits 0 for SIGTERM (a stop asked for and done; uvicorn
would raise the signal again and end the process as killed by it, -15, which ``make``
reports as "Terminated") and 130 for SIGINT, as a shell reports Ctrl-C. A second signal
exits at once with status 130. That loses no acknowledged write: a schedule or cancel is
acknowledged only after its WriteBatch is in RocksDB's write-ahead log, which survives
the process; timers that were in flight are still in the store and are delivered after
the restart (the embedded topic log commits delivery in the same batch, so none twice).

Start: the port is bound and listening before the store opens, and while it opens (a
RocksDB write-ahead-log replay can take minutes) a forked probe process answers on it:
/healthz 200, /readyz 503 "starting", anything else 503. Then uvicorn takes the sockets
over; connections made meanwhile wait in the listen backlog.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import http.server
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import Any
from urllib.parse import urlsplit

import msgspec
import uvicorn

from api.http_protocol import JsonErrorsHttpToolsProtocol
from api.schemas import ErrorBody, ErrorDetail, Health
from app import native_memory
from app.config import Settings, load_settings
from app.logs import configure_logging
from app.service import TimerService
from app.stores import open_store
from storage.errors import ConfigError, StoreOpenError
from storage.protocol import TimerStore

log = logging.getLogger("timerstore.server")
FORCED_EXIT_CODE = 130
EXIT_BAD_SETTINGS = 2
EXIT_STORE_UNAVAILABLE = 3  # the data directory cannot be opened: the message says why
EXIT_INTERRUPTED = 130  # stopped by SIGINT (Ctrl-C), as a shell reports it
EXIT_CANNOT_LISTEN = 4  # host:port cannot be bound (uvicorn would exit 3, as a bad store)
LISTEN_BACKLOG = 2048  # uvicorn's, which listens on the same sockets after the store opened
STARTING_MESSAGE = (
    "the service is starting: the store is still opening (replaying a long write-ahead log "
    "can take minutes); retry later"
)
PROBE_POLL_S = 0.05  # how soon the probe process's listeners notice they are to stop
PROBE_IDLE_S = 2.0  # a probe connection that sends nothing for this long is dropped
PROBE_FINISH_S = 0.2  # at the end, answers in progress get this long; idle connections not
PROBE_STOP_S = 5.0  # after this long the probe process is killed (it should end in FINISH)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="run the HTTP service",
        description="Run the timer service. Settings also come from TIMERSTORE_* variables.",
    )
    parser.add_argument("--host", help="bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port (default 8080)")
    parser.add_argument("--data-dir", dest="data_dir", help="data directory (default ./data)")
    parser.add_argument("--store", choices=("rocks", "wheel"), help="store (default rocks)")
    register_cluster_flags(parser)
    parser.set_defaults(handler=run)


def register_cluster_flags(parser: argparse.ArgumentParser) -> None:
    """The ``cluster`` section's settings as flags (``CLUSTER_FLAGS``), over its variables."""
    default = Settings().cluster
    group = parser.add_argument_group(
        "cluster", "join a cluster on NATS JetStream (docs/cluster.md); as TIMERSTORE_CLUSTER__*"
    )
    group.add_argument(
        "--nats-urls", help="comma-separated nats://host:port (default none: a single node)"
    )
    group.add_argument("--node-id", help="this node's id, unique in the cluster")
    group.add_argument("--advertise-url", help="this node's base URL, shown in /v1/cluster")
    group.add_argument("--partitions", type=int, help=f"partitions (default {default.partitions})")
    group.add_argument(
        "--replicas", type=int, help=f"JetStream replicas: 1, 3 or 5 (default {default.replicas})"
    )
    group.add_argument("--lease-ms", type=int, help=f"partition lease (default {default.lease_ms})")


CLUSTER_FLAGS = ("nats_urls", "node_id", "advertise_url", "partitions", "replicas", "lease_ms")


class GracefulServer(uvicorn.Server):
    """uvicorn.Server whose first signal also tells the service, and second exits now."""

    def __init__(self, config: uvicorn.Config, service: TimerService) -> None:
        super().__init__(config)
        self.service = service
        self.signals_seen = 0

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.signals_seen += 1
        if self.signals_seen > 1:
            log.warning("second signal %d: exiting now (acknowledged writes are in the WAL)", sig)
            logging.shutdown()
            os._exit(FORCED_EXIT_CODE)
        log.info("signal %d: stopping (again to force)", sig)
        self.service.begin_shutdown()
        super().handle_exit(sig, frame)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        # uvicorn names the address only when it binds it itself: say where we listen
        if not self.started:
            return
        for sock in sockets or ():
            host, port = sock.getsockname()[:2]
            log.info("listening on http://%s:%d", f"[{host}]" if ":" in host else host, port)


def bind_listeners(host: str, port: int) -> list[socket.socket]:
    """Sockets bound to every address ``host`` resolves to, as asyncio's create_server
    binds them (SO_REUSEADDR, IPv6 sockets v6-only), and listening: the probe process
    answers on them while the store opens, uvicorn after that.

    Bound before anything starts, so a port in use is an OSError here, not uvicorn's
    log line and ``sys.exit(3)`` after the service started (3 means a bad store here).
    """
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    bound: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):  # drops duplicates
            sock = socket.socket(family, kind, proto)
            bound.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(LISTEN_BACKLOG)
    except OSError:
        close_all(bound)
        raise
    return bound


def close_all(sockets: list[socket.socket]) -> None:
    for sock in sockets:
        sock.close()


def cannot_listen_message(host: str, port: int, exc: OSError) -> str:
    """One line: the address, the OS's reason and what to do."""
    reason = exc.strerror or str(exc)
    if exc.errno == errno.EADDRINUSE:
        todo = "stop the process listening there or choose another --port (TIMERSTORE_PORT)"
    else:
        todo = (
            "set --host (TIMERSTORE_HOST) to an address of this machine and --port "
            "(TIMERSTORE_PORT) to one this user may bind"
        )
    return f"cannot listen on {host}:{port}: {reason}; {todo}"


def opening_answer(method: str, path: str) -> tuple[int, bytes]:
    """The probe process's answer while the store opens: the process is up (/healthz),
    not ready (/readyz), and nothing else is served yet (the error shape of a 503)."""
    if method in ("GET", "HEAD") and path == "/healthz":
        return 200, msgspec.json.encode(Health("ok"))
    if method in ("GET", "HEAD") and path == "/readyz":
        return 503, msgspec.json.encode(Health("starting"))
    return 503, msgspec.json.encode(ErrorBody(ErrorDetail("unavailable", STARTING_MESSAGE)))


class OpeningProbeHandler(http.server.BaseHTTPRequestHandler):
    """One request a connection (HTTP/1.0), answered by ``opening_answer``."""

    timeout = PROBE_IDLE_S

    def do_GET(self) -> None:
        status, body = opening_answer(self.command, urlsplit(self.path).path)
        length = self.headers.get("Content-Length", "")
        if length.isdigit() and int(length) <= 1 << 20:
            self.rfile.read(int(length))  # read, or closing with it unread resets the answer
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if status == 503:
            self.send_header("Retry-After", "1")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_GET

    def log_message(self, format: str, *args: Any) -> None:
        """Nothing: the server's stderr must hold one line if the store cannot be opened."""


class OpeningProbeServer(http.server.ThreadingHTTPServer):
    """An HTTP server on one socket that is already bound and listening."""

    # server_close does not wait for connections: an idle one (a load balancer's spare) or
    # one trickling a byte a second held the server's start up by seconds; the answers in
    # progress get PROBE_FINISH_S in serve_until_closed
    daemon_threads = True

    def __init__(self, sock: socket.socket) -> None:
        super().__init__(sock.getsockname()[:2], OpeningProbeHandler, bind_and_activate=False)
        self.socket.close()  # the unbound socket socketserver made
        self.socket = sock

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that left or sent garbage: nothing to do, and nowhere to say it."""


class ProbeProcess:
    """A forked process that answers on the listeners while this one opens the store.

    A process, not a thread: rocksdict holds the GIL for the whole of RocksDB's open, WAL
    replay included (2.4 s for a 150 MB WAL here), so no thread of the server process, nor
    uvicorn's event loop, could answer meanwhile. It stops when this process closes its
    end of a pipe: when ``stop`` is called, or when this process dies (killed while it
    opens), so it never outlives the server.
    """

    def __init__(self, listeners: list[socket.socket]) -> None:
        read_end, self._write_end = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the probe process: answer until the pipe closes, then exit
            try:
                os.close(self._write_end)
                serve_until_closed(listeners, read_end)
            finally:
                os._exit(0)  # never run the server's cleanup or flush its buffers
        os.close(read_end)

    def stop(self) -> None:
        """Close the pipe and wait for the answers in progress (kill after PROBE_STOP_S)."""
        os.close(self._write_end)
        deadline = time.monotonic() + PROBE_STOP_S
        while os.waitpid(self.pid, os.WNOHANG)[0] == 0:
            if time.monotonic() > deadline:
                log.warning(
                    "the probe process did not end within %.0f s: killed",
                    PROBE_STOP_S,
                    extra={"event": "probe_process_killed"},
                )
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
                return
            time.sleep(0.005)


def serve_until_closed(listeners: list[socket.socket], read_end: int) -> None:
    """The probe process's work: answer on every listener until ``read_end`` is closed."""
    servers = [OpeningProbeServer(sock) for sock in listeners]
    threads = [threading.Thread(target=s.serve_forever, args=(PROBE_POLL_S,)) for s in servers]
    for thread in threads:
        thread.start()
    os.read(read_end, 1)  # b"" when the server process closed its end (or died)
    for server, thread in zip(servers, threads, strict=True):
        server.shutdown()
        server.server_close()  # closes this process's copy of the socket only
        thread.join()
    deadline = time.monotonic() + PROBE_FINISH_S
    for handler in threading.enumerate():  # what is left: connections, answered or not
        if handler is not threading.current_thread():
            handler.join(max(0.0, deadline - time.monotonic()))


def open_answering_probes(settings: Settings, listeners: list[socket.socket]) -> TimerStore:
    """Open the store while the probe process answers on ``listeners`` (where fork exists)."""
    if not hasattr(os, "fork"):
        return open_store(settings)
    probes = ProbeProcess(listeners)
    try:
        return open_store(settings)
    finally:
        probes.stop()


def graceful_shutdown_s(settings: Settings) -> float:
    """``shutdown_grace_ms`` in seconds, to the millisecond (it was rounded down to whole
    seconds, and 0 to 1). uvicorn annotates the timeout as int but only hands it to
    ``asyncio.wait_for``, which takes a float (uvicorn 0.54, ``Server.shutdown``).

    0 means requests in progress are not waited for: they are cancelled at once. It is
    passed as 1 ms, because ``wait_for`` with 0 cancels even a wait with nothing to wait
    for, and uvicorn then logs "Cancel 0 running task(s)" as an error at every stop.
    """
    return max(settings.shutdown_grace_ms, 1) / 1000


def build_server(settings: Settings, store: TimerStore | None = None) -> GracefulServer:
    """The server; ``store``, when given, is an already opened store the service takes over."""
    from api.app import create_app  # the app is only built when serving

    if store is None:
        service = TimerService(settings)
    else:
        service = TimerService(settings, store_opener=lambda _settings: store)
    app = create_app(settings, service=service)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        access_log=settings.log_level == "debug",
        log_config=None,  # app.logs.configure_logging set the root handler for every logger
        timeout_graceful_shutdown=graceful_shutdown_s(settings),  # type: ignore[arg-type]
        lifespan="on",
        **uvicorn_options(),
    )
    return GracefulServer(config, service)


@contextlib.contextmanager
def sigterm_handled_by(server: GracefulServer) -> Iterator[None]:
    """SIGTERM ends a graceful stop with exit status 0.

    uvicorn captures the signal while it serves, then restores the handler it found and
    raises the signal again into it. With the default handler that kills the process (-15);
    with this one the stop it asked for is already done, so nothing more happens. A SIGTERM
    before uvicorn captures signals starts the same graceful stop.
    """

    def on_sigterm(sig: int, frame: FrameType | None) -> None:
        if not server.signals_seen:
            server.handle_exit(sig, frame)

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def uvicorn_options() -> dict[str, Any]:
    """The parser and the loop, named rather than left to uvicorn's "auto" (which takes
    whatever is installed): httptools with JSON error answers, and uvloop (docs/perf.md,
    "The single schedule"). Tests that run a real server take the same."""
    return {"http": JsonErrorsHttpToolsProtocol, "loop": "uvloop"}


def run(args: argparse.Namespace) -> int:
    overrides = {
        "host": args.host,
        "port": args.port,
        "data_dir": args.data_dir,
        "store": args.store,
        "cluster": {name: getattr(args, name) for name in CLUSTER_FLAGS},
    }
    try:
        settings = load_settings(overrides=overrides)
    except ConfigError as exc:
        print(f"timerstore serve: {exc.message}", file=sys.stderr)
        return EXIT_BAD_SETTINGS
    configure_logging(settings.log_format, settings.log_level)  # uvicorn's logs follow it
    # before RocksDB and the stages start their threads: arenas are made per thread
    arena_max = settings.memory.malloc_arena_max
    if arena_max and not native_memory.limit_arenas(arena_max):
        log.info("memory.malloc_arena_max not applied: the C library is not glibc")
    # bound, then opened, before uvicorn starts: a port in use or a bad data directory is
    # one line, not a traceback, each with its own exit status (the probe process that
    # answers meanwhile writes nothing)
    try:
        listeners = bind_listeners(settings.host, settings.port)
    except OSError as exc:
        message = cannot_listen_message(settings.host, settings.port, exc)
        print(f"timerstore serve: {message}", file=sys.stderr)
        return EXIT_CANNOT_LISTEN
    try:
        try:
            store = open_answering_probes(settings, listeners)
        except StoreOpenError as exc:
            print(f"timerstore serve: {exc.message}", file=sys.stderr)
            return EXIT_STORE_UNAVAILABLE
        server = build_server(settings, store)
        try:
            with sigterm_handled_by(server):
                server.run(sockets=listeners)
        except KeyboardInterrupt:  # uvicorn stopped cleanly, then raised Ctrl-C's signal again
            return EXIT_INTERRUPTED
    finally:
        close_all(listeners)  # uvicorn closed them already unless its startup failed
    return 0 if server.started else 1
