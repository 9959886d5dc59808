"""The peers' specs: the servers teams already run, each started under the work dir."""

from __future__ import annotations

from bench.systems.jetstream import JetStreamSystem
from bench.systems.postgres import PostgresSystem
from bench.systems.redis_zset import RedisZsetSystem
from bench.systems.spec import Opener, SystemSpec, plain_opener

PEER_FAMILIES = ("nats", "redis", "postgres")
# one schedule message per timer, fired by the server's own scheduler: at ~5-8k/s from
# nats-py a million would take minutes to schedule, and three replicas hold it in memory
NATS_MAX_TIMERS = 200_000


def open_nats(name: str, nodes: int) -> Opener:
    return plain_opener(lambda w, ids: JetStreamSystem(name, w, nodes=nodes, record_ids=ids))


def open_redis(name: str, appendfsync: str) -> Opener:
    return plain_opener(
        lambda w, ids: RedisZsetSystem(name, w, appendfsync=appendfsync, record_ids=ids)
    )


def open_postgres(name: str) -> Opener:
    return plain_opener(lambda w, ids: PostgresSystem(name, w, record_ids=ids))


def peer_specs() -> list[SystemSpec]:
    """The servers teams already run: each starts its own server under the work dir."""
    return [
        SystemSpec(
            "nats-r3",
            "nats",
            "NATS JetStream message schedules (@at), 3 nodes, R3, file storage",
            open_nats("nats-r3", 3),
            False,
            True,
            max_timers=NATS_MAX_TIMERS,
            durability="R3 quorum ack, fsync 2 min",
            slow_calls=True,
            server_clock=True,
        ),
        SystemSpec(
            "nats-r1",
            "nats",
            "NATS JetStream message schedules (@at), 1 node, R1, file storage",
            open_nats("nats-r1", 1),
            False,
            True,
            max_timers=NATS_MAX_TIMERS,
            durability="R1, fsync 2 min",
            server_clock=True,
        ),
        *(
            SystemSpec(
                f"redis-{fsync}",
                "redis",
                "Redis sorted set (Sidekiq/BullMQ): ZADD, Lua ZRANGEBYSCORE+ZREM poller, 10 ms",
                open_redis(f"redis-{fsync}", fsync),
                False,
                True,
                durability=f"AOF {fsync}",
                slow_calls=fsync == "always",
            )
            for fsync in ("everysec", "always")
        ),
        SystemSpec(
            "postgres",
            "postgres",
            "PostgreSQL 15 queue table (river/Oban/pg-boss): COPY, SKIP LOCKED poller, 10 ms",
            open_postgres("postgres"),
            False,
            True,
            durability="fsync per commit",
            slow_calls=True,
        ),
    ]
