"""A lease that lapses on the owner's clock while JetStream does not answer, then is
renewed: the partition must deliver again, every timer it had in flight included (the
fault run's two partitions owned for minutes and never delivered)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster.errors import PartitionMovedError
from cluster.natsd import NatsCluster
from cluster.store import ClusterStore, open_cluster_store
from storage.protocol import LOG_SINK
from tests.cluster.core_helpers import cluster_settings, rocks_at, timers, wait_for

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
