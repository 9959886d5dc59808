"""A benchmarked system's description (``SystemSpec``) and how it is opened (``Opener``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from bench.systems.base import BenchSystem, Skip


class Opener(Protocol):
    def __call__(
        self,
        workdir: str,
        *,
        simulated: bool,
        record_ids: bool = False,
        statistics: bool = False,
        blob_min_bytes: int | None = None,
    ) -> BenchSystem: ...


@dataclass(frozen=True)
class SystemSpec:
    name: str
    family: str  # rocks | wheel | heap | aps | nats | redis | postgres
    description: str
    opener: Opener
    sim_clock: bool
    durable: bool
    scale: float = 1.0  # share of a scenario's size this system gets (slow baselines)
    max_timers: int | None = None  # and a cap (APScheduler keeps a ~1 KB Job object each)
    unavailable: str | None = None  # why it cannot run at all in this checkout
    durability: str = "none"  # printed beside every figure (docs/bench.md says more)
    server_clock: bool = False  # its server fires timers on its own (no start() needed)
    slow_calls: bool = False  # each schedule call waits for an fsync or a quorum (capped windows)
    delivery_only: bool = False  # a variant that differs only in delivery (misfire policy)
    precision_ms: int | None = None  # a wheel's slot width: a simulated clock walks every slot

    def open(
        self,
        workdir: str,
        *,
        simulated: bool,
        record_ids: bool = False,
        statistics: bool = False,
        blob_min_bytes: int | None = None,
    ) -> BenchSystem:
        if simulated and not self.sim_clock:
            raise Skip(f"{self.name} runs on the real clock only (no simulated clock)")
        return self.opener(
            workdir,
            simulated=simulated,
            record_ids=record_ids,
            statistics=statistics,
            blob_min_bytes=blob_min_bytes,
        )

    def size(self, n: int, floor: int = 100) -> int:
        scaled = n if self.scale >= 1 else max(min(n, floor), int(n * self.scale))
        return scaled if self.max_timers is None else min(scaled, self.max_timers)


def plain_opener(build: Callable[[str, bool], BenchSystem]) -> Opener:
    """An opener for a system that takes only its work dir and ``record_ids``."""

    def open_system(
        workdir: str,
        *,
        simulated: bool,
        record_ids: bool = False,
        statistics: bool = False,
        blob_min_bytes: int | None = None,
    ) -> BenchSystem:
        return build(workdir, record_ids)

    return open_system
