"""``timerstore serve``: the service under uvicorn, with a graceful stop.

First SIGTERM/SIGINT: the service refuses new /v1 work (503) and ends long-polls, uvicorn
stops listening and lets requests in progress finish (up to ``shutdown_grace_ms``), then
the lifespan stops the engine (queued batches commit) and closes the store.
After a graceful stop uvicorn re-raises the signal, so the process ends as killed by it
(exit status -15 / 143 for SIGTERM), as service managers expect. A second signal exits at
once with status 130. That loses no acknowledged write: a schedule or cancel is
acknowledged only after its WriteBatch is in RocksDB's write-ahead log, which survives
the process; timers that were in flight are still in the store and are delivered after
the restart (the embedded topic log commits delivery in the same batch, so none twice).
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import socket
import sys
from types import FrameType
from typing import Any

import uvicorn

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
EXIT_CANNOT_LISTEN = 4  # host:port cannot be bound (uvicorn would exit 3, as a bad store)


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
    parser.set_defaults(handler=run)


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
    binds them (SO_REUSEADDR, IPv6 sockets v6-only); uvicorn then listens on them.

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
        timeout_graceful_shutdown=max(1, settings.shutdown_grace_ms // 1000),
        lifespan="on",
    )
    return GracefulServer(config, service)


def run(args: argparse.Namespace) -> int:
    overrides = {
        "host": args.host,
        "port": args.port,
        "data_dir": args.data_dir,
        "store": args.store,
    }
    try:
        settings = load_settings(overrides=overrides)
    except ConfigError as exc:
        print(f"timerstore serve: {exc.message}", file=sys.stderr)
        return EXIT_BAD_SETTINGS
    configure_logging(settings.log_format, settings.log_level)  # uvicorn's logs follow it
    # bound, then opened, before uvicorn starts: a port in use or a bad data directory is
    # one line, not a traceback, each with its own exit status
    try:
        listeners = bind_listeners(settings.host, settings.port)
    except OSError as exc:
        message = cannot_listen_message(settings.host, settings.port, exc)
        print(f"timerstore serve: {message}", file=sys.stderr)
        return EXIT_CANNOT_LISTEN
    try:
        try:
            store = open_store(settings)
        except StoreOpenError as exc:
            print(f"timerstore serve: {exc.message}", file=sys.stderr)
            return EXIT_STORE_UNAVAILABLE
        server = build_server(settings, store)
        server.run(sockets=listeners)
    finally:
        close_all(listeners)  # uvicorn closed them already unless its startup failed
    return 0 if server.started else 1
