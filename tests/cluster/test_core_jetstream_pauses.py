"""What a node does while JetStream does not answer (its one nats-server SIGSTOPped): a
lease that lapses on the owner's clock and is renewed, and appends whose outcome is
unknown (each a bug the randomized fault run found)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from cluster.errors import FencedError, PartitionMovedError, UnsureWriteError
from cluster.natsd import NatsCluster
from cluster.store import ClusterStore, open_cluster_store
from storage.protocol import LOG_SINK
from tests.cluster.core_helpers import cluster_settings, nats_node, rocks_at, timers, wait_for

pytestmark = pytest.mark.cluster
NOW_MS = 1_000_000


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[NatsCluster]:
    with NatsCluster(tmp_path / "nats", nodes=1) as cluster:
        yield cluster


@pytest.fixture
def node(servers: NatsCluster, tmp_path: Path) -> Iterator[ClusterStore]:
    store = open_cluster_store(cluster_settings(servers.urls, "n0"), rocks_at(tmp_path / "n0"))
    try:
        wait_for(store.caught_up, "n0 owns every partition")
        yield store
    finally:
        store.close()


def test_timers_released_while_the_lease_lapsed_are_delivered_once_it_is_renewed(
    servers: NatsCluster, node: ClusterStore
) -> None:
    node.schedule(timers("orders", 5, NOW_MS - 100), NOW_MS)
    partition = node.partition("orders")
    in_flight = node.due(NOW_MS, 100)
    assert sorted(t.id for t in in_flight) == [f"t{i}" for i in range(5)]
    servers.pause(0)  # no renewal answers: the lease runs out on this node's clock
    try:
        wait_for(lambda: node.ownership.owner(partition) is None, "the lease lapsed here")
        with pytest.raises(PartitionMovedError):  # what the dispatcher meets, then releases
            node.commit_delivered(in_flight, NOW_MS + 1, sink=LOG_SINK)
        node.release(in_flight)
    finally:
        servers.resume(0)
    wait_for(lambda: node.ownership.owner(partition) is not None, "the lease renewed")
    again = node.due(NOW_MS + 2, 100)
    assert sorted(t.id for t in again) == [f"t{i}" for i in range(5)]
    assert node.commit_delivered(again, NOW_MS + 3, sink=LOG_SINK) == list(range(5))


def test_an_append_never_answered_is_unsure_not_moved(servers: NatsCluster) -> None:
    """Not acknowledged within its deadline: the record may be stored all the same, so
    it must not be an error the router retries (PartitionMovedError)."""
    with nats_node(servers.urls) as conn:
        servers.pause(0)
        try:
            with pytest.raises(UnsureWriteError) as caught:
                conn.loop.run(conn.changelog.append(5, b"x", 0, "unanswered", 1.0), 30)
        finally:
            servers.resume(0)
        assert not isinstance(caught.value, PartitionMovedError)


def test_a_refusal_after_an_unanswered_try_is_unsure(servers: NatsCluster) -> None:
    """A try whose answer was lost may be stored; JetStream refusing the next try as
    stale (10071) then says nothing of it, so the append is unsure, not fenced."""
    with nats_node(servers.urls) as conn:
        log = conn.changelog
        seq = conn.loop.run(log.append(6, b"a", 0, "first", 5), 30)
        conn.loop.run(log.append(6, b"b", seq, "second", 5), 30)  # ``seq`` is stale now
        sent = conn.client.stats["out_msgs"]
        servers.pause(0)
        try:
            stale = conn.loop.submit(log.append(6, b"c", seq, "stale", 30))
            # two tries sent while the server answers nothing: the first went unanswered
            wait_for(lambda: conn.client.stats["out_msgs"] >= sent + 2, "a second try")
        finally:
            servers.resume(0)
        with pytest.raises(UnsureWriteError):
            stale.result(30)
        with pytest.raises(FencedError):  # the same append, its first try answered
            conn.loop.run(log.append(6, b"c", seq, "stale-again", 5), 30)


def test_a_schedule_whose_record_went_unanswered_is_not_retried_by_the_router(
    servers: NatsCluster, node: ClusterStore
) -> None:
    """The schedule reaches the caller as unsure (503: it may have been made), not
    retried at the partition's next owner, where it could meet its own first try (409)."""
    servers.pause(0)
    try:
        with pytest.raises(UnsureWriteError):
            node.schedule(timers("orders", 1, NOW_MS + 60_000), NOW_MS)
    finally:
        servers.resume(0)


def test_a_delivered_batchs_partitions_append_together(
    servers: NatsCluster, node: ClusterStore
) -> None:
    """A dispatched batch over three partitions: while JetStream answers nothing, every
    partition's record is in flight at once (not one waiting for the ack before it)."""
    topics = _topics_in_partitions(node, 3)
    for topic in topics:
        node.schedule(timers(topic, 2, NOW_MS - 100), NOW_MS)
    due = node.due(NOW_MS, 100)
    parts = [node.ownership.owned_partition(node.partition(t)) for t in topics]
    servers.pause(0)
    try:
        with ThreadPoolExecutor(1) as pool:
            commit = pool.submit(node.commit_delivered, due, NOW_MS + 1, sink=LOG_SINK)
            wait_for(lambda: all(p.appending for p in parts), "every part's append in flight")
            servers.resume(0)
            assert sorted(commit.result(60)) == [0, 0, 0, 1, 1, 1]
    finally:
        servers.resume(0)


def _topics_in_partitions(node: ClusterStore, count: int) -> list[str]:
    found: dict[int, str] = {}
    for i in range(1_000):
        found.setdefault(node.partition(f"topic{i}"), f"topic{i}")
        if len(found) == count:
            return list(found.values())
    raise AssertionError(f"fewer than {count} partitions")
