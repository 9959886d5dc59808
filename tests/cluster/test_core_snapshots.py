"""Snapshots in the Object Store and the trim of the changelog, on a real nats-server."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from cluster import effects
from cluster.changelog import STREAM
from cluster.natsd import NatsCluster
from cluster.partition import OwnedPartition
from cluster.restore import catch_up, open_local, partition_dir
from cluster.snapshots import META_SUBJECTS, OBJECTS_STREAM, Snapshots, meta_subject
from storage.errors import StoreOpenError
from storage.protocol import LOG_SINK, TimerState, TimerView
from storage.rocks.store import RocksTimerStore
from tests.cluster.core_helpers import (
    Node,
    crash,
    nats_node,
    rocks_at,
    started_pair,
    state_of,
    timers,
    topic_owned_by,
    wait_for,
)

pytestmark = pytest.mark.cluster
P = 7
NOW_MS = 1_000_000


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    with NatsCluster(tmp_path / "nats", nodes=1) as servers, nats_node(servers.urls) as node:
        yield node


def records_on(node: Node) -> int:
    info = node.loop.run(node.js.stream_info(STREAM, subjects_filter=f"ts.p.{P}"))
    return int((info.state.subjects or {}).get(f"ts.p.{P}", 0))


def normalized(views: list[TimerView | None]) -> list[TimerView | None]:
    return [
        msgspec.structs.replace(v, requested_deliver_at_ms=0)
        if v is not None and v.state is TimerState.PENDING
        else v
        for v in views
    ]


def test_a_snapshot_trims_the_log_and_restores_the_state(node: Node, tmp_path: Path) -> None:
    snapshots = Snapshots(node.client, node.js, 1, node.loop)
    node.loop.run(snapshots.ensure())
    store, seq = open_local(rocks_at(tmp_path / "owner"), P, snapshots)
    writer = ("n0", 1)
    part = OwnedPartition(
        P, store, node.changelog, node.loop, writer, seq, lambda p, e: None, threading.Lock()
    )
    part.write(lambda s: effects.schedule(s, timers("a", 10, 1_000), 1_000))
    due = part.store.due(2_000, 4)
    part.write(lambda s: effects.commit_delivered(s, due, 2_001, LOG_SINK))
    part.write(lambda s: effects.cancel(s, [("a", "t9")]))
    covered = snapshots.take(part)
    assert covered == part.last_seq
    assert records_on(node) == 1  # only the record at the snapshot's sequence is left
    # appends after the trim are still fenced on the subject's last sequence
    part.write(lambda s: effects.schedule(s, timers("a", 2, 5_000, "after"), 2_002))
    idents = [("a", f"t{i}") for i in range(10)] + [("a", "after0"), ("a", "after1")]
    expected = state_of(part.store, idents, ["a"])
    replica, at = open_local(rocks_at(tmp_path / "replica"), P, snapshots)
    assert at == covered
    catch_up(node.loop, node.changelog, P, replica, at)
    found = state_of(replica, idents, ["a"])
    assert normalized(found[0]) == normalized(expected[0])  # type: ignore[index]
    assert found[1:] == expected[1:]  # type: ignore[index]
    assert [m.id for m in replica.read_log("a", 0, 10)] == ["t0", "t1", "t2", "t3"]
    replica.close()
    assert snapshots.take(part) == part.last_seq  # a second one replaces the first
    newest = snapshots.latest(P)
    assert newest is not None and newest.seq == part.last_seq
    assert meta_subjects(node) == [meta_subject(newest.name)]  # the first's meta purged too
    part.close()


def meta_subjects(node: Node) -> list[str]:
    info = node.loop.run(node.js.stream_info(OBJECTS_STREAM, subjects_filter=META_SUBJECTS))
    return sorted(info.state.subjects or {})


def test_a_new_owner_restores_from_the_snapshot(tmp_path: Path) -> None:
    with (
        NatsCluster(tmp_path / "nats", nodes=1) as servers,
        started_pair(servers.urls, tmp_path) as (n0, n1),
    ):
        topic = topic_owned_by([n0, n1], "n0")
        n1.schedule(timers(topic, 6, NOW_MS - 100), NOW_MS)
        due = n0.due(NOW_MS, 3)
        n0.commit_delivered(due, NOW_MS + 1, sink=LOG_SINK)
        part = n0.ownership.owned[n0.partition(topic)]
        snapshots = n0.ownership.snapshots
        assert snapshots is not None and snapshots.take(part) == part.last_seq
        n1.cancel([(topic, "t5")])  # a record after the snapshot
        crash(n0)
        wait_for(lambda: n1.ownership.owner(n1.partition(topic)) is not None, "n1 took over")
        assert [m.id for m in n1.read_log(topic, 0, 10)] == [t.id for t in due]
        assert [t.id for t in n1.list_pending(topic=topic).timers] == ["t3", "t4"]


def test_a_corrupt_local_dir_is_rebuilt_not_failed_for_ever(tmp_path: Path) -> None:
    """A node killed while it wrote a partition's directory (a snapshot being unpacked)
    leaves files RocksDB calls corrupt: the restore empties the directory and rebuilds
    it, instead of failing at every tick while the node holds the lease (a fault run
    left a partition undelivered that way)."""
    rocks = rocks_at(tmp_path / "n0")
    path = partition_dir(rocks, 3)
    path.parent.mkdir(parents=True)
    store = RocksTimerStore(dataclasses.replace(rocks, path=str(path)))
    store.schedule(timers("orders", 3, NOW_MS + 60_000), NOW_MS)
    store.close()
    for manifest in path.glob("MANIFEST-*"):
        manifest.write_bytes(b"\x00garbage" * 100)
    with pytest.raises(StoreOpenError, match="Corruption"):
        RocksTimerStore(dataclasses.replace(rocks, path=str(path)))
    store, seq = open_local(rocks, 3)
    try:
        assert seq == 0 and store.stats().pending == 0  # emptied, for the changelog to fill
    finally:
        store.close()
