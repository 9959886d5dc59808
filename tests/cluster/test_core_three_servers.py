"""ClusterStore on 3 real nats-servers (R3), default lease: a lost node and a lost server."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from cluster.natsd import NatsCluster
from cluster.settings import ClusterSettings
from cluster.store import ClusterStore, open_cluster_store
from storage.errors import StoreClosedError
from storage.protocol import TimerState
from tests.cluster.core_helpers import crash, rocks_at, settled, timers, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
NOW_MS = 1_000_000
NODES = ("n0", "n1", "n2")


def settings(urls: list[str], node_id: str) -> ClusterSettings:
    return ClusterSettings(
        nats_urls=tuple(urls), node_id=node_id, advertise_url=f"http://{node_id}"
    )


def retried(call: Callable[[], object]) -> None:
    """``call`` until it is not refused with a 503 (StoreClosedError), for up to 60 s."""
    deadline = time.monotonic() + 60
    while True:
        try:
            call()
            return
        except StoreClosedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def taken_over(survivors: list[ClusterStore], gone: str) -> bool:
    owners = [o.node_id for o in survivors[0].cluster_view().owners]
    caught_up = all(s.caught_up() for s in survivors)
    return caught_up and gone not in owners and None not in owners


def test_a_lost_node_and_a_lost_server_lose_no_write(tmp_path: Path) -> None:
    with NatsCluster(tmp_path / "nats", nodes=3) as servers:
        stores = [
            open_cluster_store(settings(servers.urls, n), rocks_at(tmp_path / n)) for n in NODES
        ]
        try:
            wait_for(lambda: settled(stores), "three nodes own partitions", 60)
            topics = [f"topic{i}" for i in range(24)]
            for i, topic in enumerate(topics):  # a lease may lapse on a loaded machine: a 503
                first = timers(topic, 5, NOW_MS + 3_600_000)
                retried(lambda s=stores[i % 3], first=first: s.schedule(first, NOW_MS))
            crashed_at = time.monotonic()
            crash(stores[0])
            survivors = stores[1:]
            wait_for(lambda: taken_over(survivors, "n0"), "n0's partitions taken over", 60)
            print(f"takeover after a crash: {time.monotonic() - crashed_at:.1f} s")
            for topic in topics:
                view = survivors[1].get(topic, "t4")
                assert view is not None and view.state == TimerState.PENDING
            servers.kill(1)
            for i, topic in enumerate(topics):  # as a client would: again after a 503
                more = timers(topic, 2, NOW_MS + 7_200_000, "after")
                retried(lambda s=survivors[i % 2], more=more: s.schedule(more, NOW_MS))
            assert survivors[0].stats().pending == len(topics) * 7
        finally:
            for store in stores[1:]:
                store.close()
