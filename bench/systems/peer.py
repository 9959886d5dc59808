"""What the three peers (Redis, PostgreSQL, JetStream) share: a server they own, and
deliveries recorded with their lateness.

A peer runs on the real clock only. ``kill_server`` / ``restart_server`` are the
recovery scenario's SIGKILL and restart; ``pending_ids`` lists what survived.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from typing import Any

from bench.measure import lateness_summary, now_ms
from bench.systems.base import BenchSystem, Delivery

log = logging.getLogger(__name__)


class PeerSystem(BenchSystem):
    """A peer: the server it started, and the deliveries it saw, each with its lateness."""

    sim_clock = False
    batch_native = True
    server_clock = False  # True when the server fires timers itself (no start() needed)

    def __init__(self, name: str, workdir: str, *, record_ids: bool = False) -> None:
        super().__init__(name, workdir)
        self._delivery = Delivery(record_ids=record_ids)
        self._lock = threading.Lock()
        self.server_errors = 0  # failed poll rounds (the server was down)
        self.first_delivery_ms: int | None = None  # of a delivery at first_from_ms or later
        self.first_from_ms = 0

    def record(self, items: Iterable[tuple[str, int]], at_ms: int) -> int:
        """Record deliveries ``(id, due_ms)`` that reached the log at ``at_ms``."""
        n = 0
        with self._lock:
            for tid, due_ms in items:
                self._delivery.add(tid, at_ms - due_ms)
                n += 1
            if n and self.first_delivery_ms is None and at_ms >= self.first_from_ms:
                self.first_delivery_ms = at_ms
        return n

    def delivered(self) -> int:
        return self._delivery.count

    def lateness(self) -> dict[str, Any]:
        with self._lock:
            return lateness_summary(list(self._delivery.lateness_ms), self._delivery.early)

    def delivered_ids(self) -> set[str]:
        with self._lock:
            return set(self._delivery.ids)

    def kill_server(self) -> None:
        raise NotImplementedError

    def restart_server(self) -> float:
        """Start the killed server again; seconds until it answers with its data loaded."""
        raise NotImplementedError

    def pending_ids(self) -> set[str]:
        raise NotImplementedError

    def server_rss_bytes(self) -> int:
        raise NotImplementedError

    def counters(self) -> dict[str, Any]:
        rss = self.server_rss_bytes()
        return {"server_rss_mb": rss / 2**20, "server_errors": self.server_errors}


class Poller:
    """A thread that asks the server for due timers every ``poll_ms`` (at once when a
    full batch came back): Sidekiq's, BullMQ's and the queue tables' way of delivering."""

    def __init__(self, peer: PeerSystem, take_due: Any, poll_ms: int, batch: int) -> None:
        self.peer = peer
        self.take_due = take_due  # (now_ms) -> list[(id, due_ms)], taken from the server
        self.poll_s = poll_ms / 1000
        self.batch = batch
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"poll-{peer.name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                items = self.take_due(now_ms())
            except Exception:  # the server was killed (recovery): count, retry
                log.debug("poll of %s failed", self.peer.name, exc_info=True)
                self.peer.server_errors += 1
                self._stop.wait(0.05)
                continue
            self.peer.record(items, now_ms())
            if len(items) < self.batch:
                self._stop.wait(self.poll_s)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(30)


def wait_delivered(peer: PeerSystem, count: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while peer.delivered() < count:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True
