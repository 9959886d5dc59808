"""A PostgreSQL queue table: the pattern of river, Oban, pg-boss and Solid Queue.

One table with a B-tree index on the due time; a schedule is one ``COPY`` per batch (the
fastest bulk path, river's ``InsertMany``); the poller takes due rows with
``DELETE ... WHERE id IN (SELECT ... ORDER BY run_at_ms LIMIT n FOR UPDATE SKIP
LOCKED) RETURNING``, so concurrent pollers never take the same row. Cancel is a
``DELETE ... RETURNING``: truthful, a row already taken is not returned.
The cluster is a throwaway ``initdb`` under the work dir with ``synchronous_commit`` on
and ``fsync`` on (the defaults), run as an unprivileged user when we are root.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from typing import Any

import psycopg

from bench.systems.base import BenchTimer
from bench.systems.peer import PeerSystem, Poller
from bench.systems.servers import (
    UNPRIVILEGED_USER,
    ServerProcess,
    as_user,
    binary,
    free_port,
    give_to_user,
    searchable_by_others,
    wait_for,
)

PG_BIN = "/usr/lib/postgresql/15/bin"
SCHEMA = """
CREATE TABLE timers (
    id text PRIMARY KEY,
    run_at_ms bigint NOT NULL,
    payload bytea NOT NULL
);
CREATE INDEX timers_run_at ON timers (run_at_ms);
"""
TAKE_DUE = """
DELETE FROM timers WHERE id IN (
    SELECT id FROM timers WHERE run_at_ms <= %s
    ORDER BY run_at_ms LIMIT %s FOR UPDATE SKIP LOCKED
) RETURNING id, run_at_ms
"""
POLL_MS = 10  # river stages every 5 s, Oban 1 s, pg-boss 2 s; 10 ms = the engine's tick
BATCH = 1000
SOCKET_PATH_MAX = 100  # a unix socket path is at most 107 bytes


class PostgresSystem(PeerSystem):
    durable = True

    def __init__(self, name: str, workdir: str, *, record_ids: bool = False) -> None:
        super().__init__(name, workdir, record_ids=record_ids)
        self.port = free_port()
        self.user = UNPRIVILEGED_USER if os.geteuid() == 0 else None
        self.outside: str | None = None  # the data's own dir when workdir is closed to it
        base = self._base_dir()
        self.data_dir = os.path.join(base, "pgdata")
        self.socket_dir = os.path.join(base, "sock")
        self.server = ServerProcess(self._postgres_args(), os.path.join(workdir, "pg.log"))
        self.server.user = self.user
        self._poller: Poller | None = None
        self.conn: psycopg.Connection[Any] | None = None
        self.poll_conn: psycopg.Connection[Any] | None = None
        try:
            self._initdb()
            self.restart_server()
            with self._connect() as conn:
                conn.execute(SCHEMA)
        except BaseException:
            self.close()
            raise

    def _base_dir(self) -> str:
        """The work dir, or (as root, when the unprivileged user cannot reach the work
        dir) a fresh dir in the temp dir, linked from the work dir so the disk figures
        count it, and removed by ``close``."""
        workdir = os.path.abspath(self.workdir)
        if self.user is None or searchable_by_others(os.path.join(workdir, "x")):
            return workdir
        self.outside = tempfile.mkdtemp(prefix="timerstore-bench-pg-")
        os.chmod(self.outside, 0o711)
        os.symlink(self.outside, os.path.join(workdir, "postgres"))
        return self.outside

    def _initdb(self) -> None:
        import subprocess

        if self.user is not None:
            give_to_user(self.data_dir, self.user)
            give_to_user(self.socket_dir, self.user)
        args = [binary("initdb", f"{PG_BIN}/initdb"), "-D", self.data_dir, "-U", "bench"]
        args += ["--auth=trust", "--encoding=UTF8", "--no-instructions"]
        done = subprocess.run(
            args, capture_output=True, text=True, timeout=120, **as_user(self.user)
        )
        if done.returncode:
            raise RuntimeError(f"initdb failed: {done.stderr.strip()[-500:]}")

    def _postgres_args(self) -> list[str]:
        sockets = self.socket_dir
        os.makedirs(sockets, exist_ok=True)
        if len(sockets) > SOCKET_PATH_MAX - 20:
            sockets = ""  # too long for a unix socket: TCP only (the bench uses TCP anyway)
        settings = {
            "port": self.port,
            "listen_addresses": "127.0.0.1",
            "unix_socket_directories": sockets,
            "synchronous_commit": "on",
            "fsync": "on",
            "shared_buffers": "256MB",
            "max_wal_size": "4GB",
            "wal_buffers": "16MB",
            "checkpoint_timeout": "15min",
        }
        args = [binary("postgres", f"{PG_BIN}/postgres"), "-D", self.data_dir]
        for key, value in settings.items():
            args += ["-c", f"{key}={value}"]
        return args

    def _connect(self) -> psycopg.Connection[Any]:
        return psycopg.connect(
            host="127.0.0.1", port=self.port, user="bench", dbname="postgres", autocommit=True
        )

    def _answers(self) -> bool:
        if not self.server.alive:
            raise RuntimeError(f"postgres exited: {self.server.log_tail()}")
        try:
            with self._connect() as conn:
                conn.execute("SELECT count(*) FROM pg_class")
            return True
        except psycopg.OperationalError:
            return False

    def restart_server(self) -> float:
        for conn in (self.conn, self.poll_conn):
            if conn is not None:
                conn.close()
        self.server.start()
        ready_s = wait_for(self._answers, 120, "postgres")
        self.conn = self._connect()
        self.poll_conn = self._connect()
        return ready_s

    def kill_server(self) -> None:
        self.server.kill()  # the postmaster and its backends (one process group)

    def _schedule(self, timers: Sequence[BenchTimer], now_ms: int) -> None:
        assert self.conn is not None
        with (
            self.conn.transaction(),
            self.conn.cursor() as cur,
            cur.copy("COPY timers (id, run_at_ms, payload) FROM STDIN") as copy,
        ):
            for t in timers:
                copy.write_row((t.id, t.deliver_at_ms, t.payload))

    def cancel(self, ids: Sequence[str]) -> int:
        assert self.conn is not None
        cur = self.conn.execute("DELETE FROM timers WHERE id = ANY(%s) RETURNING id", [list(ids)])
        return len(cur.fetchall())

    def take_due(self, now_ms: int) -> list[tuple[str, int]]:
        assert self.poll_conn is not None
        rows = self.poll_conn.execute(TAKE_DUE, (now_ms, BATCH), prepare=True).fetchall()
        return [(r[0], int(r[1])) for r in rows]

    def start(self) -> None:
        self._poller = Poller(self, self._take_reconnecting, POLL_MS, BATCH)
        self._poller.start()

    def _take_reconnecting(self, now_ms: int) -> list[tuple[str, int]]:
        if self.poll_conn is None or self.poll_conn.closed:
            self.poll_conn = self._connect()
        return self.take_due(now_ms)

    def stop(self) -> None:
        if self._poller is not None:
            self._poller.stop()
            self._poller = None

    def pending(self) -> int:
        assert self.conn is not None
        row = self.conn.execute("SELECT count(*) FROM timers").fetchone()
        return int(row[0]) if row else 0

    def pending_ids(self) -> set[str]:
        assert self.conn is not None
        return {r[0] for r in self.conn.execute("SELECT id FROM timers").fetchall()}

    def server_rss_bytes(self) -> int:
        return self.server.rss_bytes()

    def close(self) -> None:
        try:
            self.stop()
            for conn in (self.conn, self.poll_conn):
                if conn is not None:
                    conn.close()
        finally:
            self.server.stop()
            if self.outside is not None:
                shutil.rmtree(self.outside, ignore_errors=True)
