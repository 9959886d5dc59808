"""The benchmarked systems and how to open each one for a scenario."""

from __future__ import annotations

from typing import Protocol

from bench.systems.aps import ApsSystem
from bench.systems.base import BenchSystem, BenchTimer, Skip
from bench.systems.engine_system import (
    EngineSystem,
    StoreFactory,
    rocks_factory,
    wheel_factory,
)
from bench.systems.heap import HeapSystem
from bench.systems.peer_specs import PEER_FAMILIES, peer_specs
from bench.systems.spec import Opener, SystemSpec, plain_opener

__all__ = [
    "PEER_FAMILIES",
    "BenchSystem",
    "BenchTimer",
    "Skip",
    "SystemSpec",
    "all_specs",
    "select_specs",
]

ROCKS = "rocks"


def _engine_opener(name: str, factory_of: StoreFactoryMaker) -> Opener:
    def open_engine(
        workdir: str,
        *,
        simulated: bool,
        record_ids: bool = False,
        statistics: bool = False,
        blob_min_bytes: int | None = None,
    ) -> BenchSystem:
        factory = factory_of(statistics, blob_min_bytes)
        return EngineSystem(name, workdir, factory, simulated=simulated, record_ids=record_ids)

    return open_engine


class StoreFactoryMaker(Protocol):
    def __call__(self, statistics: bool, blob_min_bytes: int | None) -> StoreFactory: ...


def _rocks(statistics: bool, blob_min_bytes: int | None) -> StoreFactory:
    return rocks_factory(statistics=statistics, blob_min_bytes=blob_min_bytes)


def _wheel(precision_ms: int) -> StoreFactoryMaker:
    def make(statistics: bool, blob_min_bytes: int | None) -> StoreFactory:
        return wheel_factory(precision_ms)

    return make


def _heap_opener(name: str) -> Opener:
    return plain_opener(lambda workdir, ids: HeapSystem(name, workdir, record_ids=ids))


def _aps_opener(name: str, sqlite: bool, grace_default: bool) -> Opener:
    def build(workdir: str, record_ids: bool) -> BenchSystem:
        return ApsSystem(
            name, workdir, sqlite=sqlite, grace_default=grace_default, record_ids=record_ids
        )

    return plain_opener(build)


def all_specs() -> list[SystemSpec]:
    """Every system, in the order the results and the report list them."""
    return [
        _rocks_spec(),
        _rocks_sync_spec(),
        *(_wheel_spec(precision_ms) for precision_ms in (1000, 10)),
        _heap_spec(),
        *(
            _aps_spec(store, scale, cap, grace_default)
            for store, scale, cap in (("memory", 0.25, 250_000), ("sqlite", 0.02, 20_000))
            for grace_default in (True, False)
        ),
        *peer_specs(),
    ]


def _rocks_spec() -> SystemSpec:
    return SystemSpec(
        ROCKS,
        "rocks",
        "RocksDB store through the Engine",
        _engine_opener(ROCKS, _rocks),
        True,
        True,
        durability=ROCKS_DURABILITY,
    )


def _rocks_sync(statistics: bool, blob_min_bytes: int | None) -> StoreFactory:
    return rocks_factory(statistics=statistics, blob_min_bytes=blob_min_bytes, sync_writes=True)


def _rocks_sync_spec() -> SystemSpec:
    name = "rocks-sync"
    return SystemSpec(
        name,
        "rocks-sync",
        "RocksDB store through the Engine, sync_writes (fsync per schedule call)",
        _engine_opener(name, _rocks_sync),
        True,
        True,
        durability="fsync per write",
        slow_calls=True,
    )


def _wheel_spec(precision_ms: int) -> SystemSpec:
    name = f"wheel-{precision_ms}ms"
    return SystemSpec(
        name,
        "wheel",
        f"RIP-43 time wheel at {precision_ms} ms precision through the Engine",
        _engine_opener(name, _wheel(precision_ms)),
        True,
        True,
        precision_ms=precision_ms,
        durability="log, no fsync",
    )


def _heap_spec() -> SystemSpec:
    # about 500 B of Python objects per timer: 20M would not fit in memory
    return SystemSpec(
        "heap",
        "heap",
        "in-memory heapq, no durability",
        _heap_opener("heap"),
        True,
        False,
        max_timers=5_000_000,
    )


def _aps_spec(store: str, scale: float, cap: int, grace_default: bool) -> SystemSpec:
    """APScheduler on the ``store`` job store, at ``scale`` of a scenario's size up to ``cap``."""
    suffix = "" if grace_default else "-nograce"
    name = f"aps-{store}{suffix}"
    grace = "misfire_grace_time default (1 s)" if grace_default else "misfire_grace_time None"
    return SystemSpec(
        name,
        "aps",
        f"APScheduler 3 date jobs, {store} job store, {grace}",
        _aps_opener(name, store == "sqlite", grace_default),
        False,
        store == "sqlite",
        scale=scale,
        max_timers=cap,
        delivery_only=not grace_default,
        durability="fsync per commit" if store == "sqlite" else "none",
    )


ROCKS_DURABILITY = "WAL, no fsync"


def select_specs(wanted: list[str] | None) -> list[SystemSpec]:
    """The specs named (exactly, or by family: ``wheel`` selects both wheel variants)."""
    specs = all_specs()
    if not wanted:
        return specs
    chosen = [s for s in specs if s.name in wanted or s.family in wanted]
    unknown = set(wanted) - {s.name for s in specs} - {s.family for s in specs}
    if unknown:
        valid = ", ".join(dict.fromkeys([*(s.family for s in specs), *(s.name for s in specs)]))
        raise ValueError(f"unknown systems: {', '.join(sorted(unknown))} (valid: {valid})")
    return chosen
