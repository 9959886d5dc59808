"""The one small interface every benchmarked system sits behind.

A timer in the benchmark is ``(id, deliver_at_ms, payload)`` on one topic. Systems that
can run on a simulated clock (``sim_clock``) deliver only inside ``run_due(now_ms)``;
the others deliver on the real clock once ``start()`` was called.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

TOPIC = "bench"


class BenchTimer(NamedTuple):
    id: str
    deliver_at_ms: int
    payload: bytes


class Skip(Exception):
    """Raised by a scenario for a system that cannot run it; the message says why."""


@dataclass
class Delivery:
    """What a system delivered: counts, lateness values, and (when asked) the ids."""

    record_ids: bool = False
    count: int = 0
    early: int = 0
    lateness_ms: list[int] = field(default_factory=list)
    ids: set[str] = field(default_factory=set)

    def add(self, timer_id: str, late_ms: int) -> None:
        """One delivery, ``late_ms`` after its due time (negative: early)."""
        self.count += 1
        self.lateness_ms.append(late_ms)
        self.early += late_ms < 0
        if self.record_ids:
            self.ids.add(timer_id)


class BenchSystem:
    """Base of the adapters; subclasses override what they support."""

    sim_clock = False  # can be driven by run_due(now_ms) on a simulated clock
    durable = False
    batch_native = False  # schedule() of a batch is one store call (else a per-timer loop)

    def __init__(self, name: str, workdir: str) -> None:
        self.name = name
        self.workdir = workdir
        os.makedirs(workdir, exist_ok=True)
        self.scheduled = 0
        self.payload_bytes = 0

    def schedule(self, timers: Sequence[BenchTimer], now_ms: int) -> None:
        self.scheduled += len(timers)
        self.payload_bytes += sum(len(t.payload) for t in timers)
        self._schedule(timers, now_ms)

    def _schedule(self, timers: Sequence[BenchTimer], now_ms: int) -> None:
        raise NotImplementedError

    def cancel(self, ids: Sequence[str]) -> int:
        """Cancel timers by id; return how many were removed."""
        raise NotImplementedError

    def start(self) -> None:
        """Begin delivering on the real clock."""
        raise NotImplementedError

    def stop(self) -> None:
        return None

    def run_due(self, now_ms: int) -> int:
        """Deliver everything due at ``now_ms`` (simulated clock); return the count."""
        raise NotImplementedError

    def delivered(self) -> int:
        raise NotImplementedError

    def lateness(self) -> dict[str, Any]:
        """p50/p99/max lateness in ms and the count of early deliveries."""
        raise NotImplementedError

    def delivered_ids(self) -> set[str]:
        raise NotImplementedError

    def pending(self) -> int:
        raise NotImplementedError

    def counters(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        return None


def dir_bytes(path: str) -> int:
    """Bytes on disk under ``path`` (allocated blocks, so sparse files count as stored),
    following links to dirs (a peer's data kept outside a closed work dir)."""
    total = 0
    for root, _dirs, files in os.walk(path, followlinks=True):
        for name in files:
            try:
                st = os.stat(os.path.join(root, name))
            except FileNotFoundError:
                continue
            total += min(st.st_size, st.st_blocks * 512)
    return total
