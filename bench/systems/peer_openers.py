"""How to open each peer system: the openers ``bench.systems`` puts in its specs."""

from __future__ import annotations

from collections.abc import Callable

from bench.systems.base import BenchSystem
from bench.systems.jetstream import JetStreamSystem
from bench.systems.postgres import PostgresSystem
from bench.systems.redis_zset import RedisZsetSystem


def open_nats(name: str, nodes: int) -> Callable[..., BenchSystem]:
    def opener(
        workdir: str,
        *,
        simulated: bool,
        record_ids: bool = False,
        statistics: bool = False,
        blob_min_bytes: int | None = None,
    ) -> BenchSystem:
        return JetStreamSystem(name, workdir, nodes=nodes, record_ids=record_ids)

    return opener


def open_redis(name: str, appendfsync: str) -> Callable[..., BenchSystem]:
    def opener(
        workdir: str,
        *,
        simulated: bool,
        record_ids: bool = False,
        statistics: bool = False,
        blob_min_bytes: int | None = None,
    ) -> BenchSystem:
        return RedisZsetSystem(name, workdir, appendfsync=appendfsync, record_ids=record_ids)

    return opener


def open_postgres(name: str) -> Callable[..., BenchSystem]:
    def opener(
        workdir: str,
        *,
        simulated: bool,
        record_ids: bool = False,
        statistics: bool = False,
        blob_min_bytes: int | None = None,
    ) -> BenchSystem:
        return PostgresSystem(name, workdir, record_ids=record_ids)

    return opener
