"""Helpers of the core cluster tests: a NATS connection on a LoopThread, timers, states."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from nats.aio.client import Client

from cluster.changelog import Changelog
from cluster.connect import JETSTREAM_TIMEOUT_S, connect
from cluster.errors import PartitionMovedError
from cluster.leases import preferred_owner
from cluster.loop import LoopThread
from cluster.settings import ClusterSettings
from cluster.store import ClusterStore, open_cluster_store
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


def cluster_settings(urls: list[str], node_id: str, partitions: int = 4) -> ClusterSettings:
    return ClusterSettings(
        nats_urls=tuple(urls),
        node_id=node_id,
        advertise_url=f"http://{node_id}.invalid",
        partitions=partitions,
        replicas=1,
        lease_ms=2_000,
    )


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        time.sleep(0.05)


def settled(stores: list[ClusterStore]) -> bool:
    """Every store joined and every partition owned by its preferred owner (so no hand
    back is still to come: a call meeting one waits, then answers 503)."""
    if not all(s.caught_up() for s in stores):
        return False
    nodes = sorted(s.node_id for s in stores)
    owned = {o.partition: o.node_id for o in stores[0].cluster_view().owners}
    return all(node == preferred_owner(p, nodes) for p, node in owned.items())


def crash(store: ClusterStore) -> None:
    """As near a SIGKILL as one process allows: the balance loop and the connection gone,
    no lease released, the local stores closed as they are."""
    own = store.ownership
    store._closed = True  # its close() has nothing left to do
    store.loop.run(_halt(store), 10)
    store.mirror.close()  # its own thread and connection die with the process too
    for part in list(own.owned.values()):
        part.lost = PartitionMovedError("crashed")
        part.store.simulate_crash()
    store.loop.stop()


async def _halt(store: ClusterStore) -> None:
    task = store.ownership._task
    if task is not None:
        task.cancel()
    await store.client.close()


def owner_of(stores: list[ClusterStore], topic: str) -> ClusterStore:
    """The store owning ``topic``'s partition, waited for while the partition moves."""
    partition = stores[0].partition(topic)

    def owners() -> list[ClusterStore]:
        return [s for s in stores if s.ownership.owner(partition) is not None]

    wait_for(lambda: bool(owners()), f"an owner of partition {partition}")
    return owners()[0]


@contextmanager
def started_pair(urls: list[str], root: Path) -> Iterator[list[ClusterStore]]:
    """Nodes n0 and n1 on ``urls``, settled, each closed at the end."""
    stores: list[ClusterStore] = []
    try:
        for node in ("n0", "n1"):
            stores.append(open_cluster_store(cluster_settings(urls, node), rocks_at(root / node)))
        wait_for(lambda: settled(stores), "both nodes own partitions")
        yield stores
    finally:
        for store in stores:
            store.close()


def topic_owned_by(stores: list[ClusterStore], node_id: str) -> str:
    for i in range(1_000):
        if owner_of(stores, f"topic{i}").node_id == node_id:
            return f"topic{i}"
    raise AssertionError(f"{node_id} owns none of 1,000 topics")
