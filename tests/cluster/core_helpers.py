"""Helpers of the core cluster tests: a NATS connection on a LoopThread, timers, states."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from nats.aio.client import Client

from cluster.changelog import Changelog
from cluster.connect import JETSTREAM_TIMEOUT_S, connect
from cluster.loop import LoopThread
from storage.protocol import NewTimer, TimerStore
from storage.rocks.db import RocksSettings


class Node:
    """One test's connection: its loop thread, client and changelog."""

    def __init__(self, urls: list[str], replicas: int = 1) -> None:
        self.loop = LoopThread("test-nats")
        self.client: Client = self.loop.run(connect(urls, "test"), 30)
        self.js = self.client.jetstream(timeout=JETSTREAM_TIMEOUT_S)
        self.changelog = Changelog(self.js, replicas)
        self.loop.run(self.changelog.ensure(), 30)

    def close(self) -> None:
        self.loop.run(self.client.close(), 10)
        self.loop.stop()


@contextmanager
def nats_node(urls: list[str], replicas: int = 1) -> Iterator[Node]:
    node = Node(urls, replicas)
    try:
        yield node
    finally:
        node.close()


def rocks_at(path: Path) -> RocksSettings:
    return dataclasses.replace(RocksSettings(), path=str(path))


def timers(topic: str, count: int, at_ms: int, prefix: str = "t") -> list[NewTimer]:
    return [NewTimer(topic, f"{prefix}{i}", at_ms + i, f"p{i}".encode()) for i in range(count)]


def state_of(store: TimerStore, idents: list[tuple[str, str]], topics: list[str]) -> object:
    """What a reader can see of a store: each timer, each topic's log, the dead letters,
    the counts (in-flight aside: it is not replicated)."""
    views = [store.get(t, i) for t, i in idents]
    logs = {topic: store.read_log(topic, 0, 10_000) for topic in topics}
    stats = store.stats()
    dead = store.dead_letters(limit=10_000).timers
    counts = (stats.pending, stats.delivered, stats.cancelled, stats.dead_lettered)
    return views, logs, dead, counts, stats.pending_by_topic
