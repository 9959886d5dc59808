"""What the scenarios share: the context a run gets, columns of its table, timer makers."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.sizes import Sizes
from bench.systems import BenchSystem, BenchTimer, SystemSpec

ProgressFn = Callable[[float], None]


@dataclass(frozen=True)
class Column:
    key: str  # a dotted path into the system's figures
    label: str
    unit: str = ""  # "/s", "ms", "MB", "B", "x", "" (a count)
    ratio: bool = False  # show the ratio against the RocksDB store
    better: str = "higher"  # or "lower"


@dataclass
class Context:
    sizes: Sizes
    workdir: str
    progress: ProgressFn = lambda fraction: None
    rng: random.Random = field(default_factory=lambda: random.Random(5))
    opened: list[BenchSystem] = field(default_factory=list)

    def open(self, spec: SystemSpec, sub: str = "store", **kwargs: Any) -> BenchSystem:
        system = spec.open(os.path.join(self.workdir, sub), **kwargs)
        self.opened.append(system)
        return system


_POOL: list[bytes] = []
_POOL_BYTES = 4 << 20


def payload_pool() -> bytes:
    """Random bytes to slice payloads from: incompressible, and cheap to make per timer."""
    if not _POOL:
        _POOL.append(os.urandom(_POOL_BYTES + (64 << 10)))
    return _POOL[0]


def payload(rng: random.Random, size: int) -> bytes:
    start = rng.randrange(_POOL_BYTES)
    return payload_pool()[start : start + size]


def timers(
    prefix: str,
    start: int,
    count: int,
    deliver_at_ms: Callable[[int], int],
    size: int,
    rng: random.Random,
) -> list[BenchTimer]:
    return [
        BenchTimer(f"{prefix}{i}", deliver_at_ms(i), payload(rng, size))
        for i in range(start, start + count)
    ]


def fixed(deliver_at_ms: int) -> Callable[[int], int]:
    """Every timer due at the same instant."""
    return lambda _i: deliver_at_ms


def chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def wait_until(
    done: Callable[[], bool], timeout_s: float, poll_s: float = 0.02, tick: ProgressFn | None = None
) -> bool:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            return False
        if tick is not None:
            tick(0.0)
        time.sleep(poll_s)
    return True


def drain_sim(system: BenchSystem, now_ms: int, expected: int, rounds: int = 10_000) -> int:
    """Deliver on a simulated clock until ``expected`` were delivered or nothing moves."""
    for _ in range(rounds):
        if system.delivered() >= expected or system.run_due(now_ms) == 0:
            break
    return system.delivered()
