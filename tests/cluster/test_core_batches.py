"""Batches split by partition (``cluster.batches``) on a real nats-server: one call per
owner node carrying every part for it, each part answered on its own."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import msgspec
import pytest
from nats.aio.msg import Msg

from cluster.errors import PartitionMovedError
from cluster.natsd import NatsCluster
from cluster.rpc import decode_parts_call, parts_subject
from cluster.rpc_server import parts_answer, send_parts
from cluster.store import ClusterStore
from storage.errors import ConflictError
from storage.protocol import CancelOutcome, NewTimer, ScheduleResult
from tests.cluster.core_helpers import owner_of, started_pair, timers, wait_for

pytestmark = pytest.mark.cluster
NOW_MS = 1_000_000


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[list[ClusterStore]]:
    with (
        NatsCluster(tmp_path / "nats", nodes=1) as servers,
        started_pair(servers.urls, tmp_path) as stores,
    ):
        yield stores


def topics_by_partition(stores: list[ClusterStore], node_id: str, count: int) -> list[str]:
    """``count`` topics owned by ``node_id``, each in a partition of its own."""
    found: dict[int, str] = {}
    for i in range(1_000):
        topic = f"topic{i}"
        if owner_of(stores, topic).node_id == node_id:
            found.setdefault(stores[0].partition(topic), topic)
        if len(found) == count:
            return list(found.values())
    raise AssertionError(f"{node_id} owns fewer than {count} partitions")


def spy_on_parts(store: ClusterStore, node_id: str) -> list[Msg]:
    """Every parts call sent to ``node_id`` (seen by ``store``'s connection as well)."""
    seen: list[Msg] = []

    async def subscribe() -> None:
        async def record(msg: Msg) -> None:
            seen.append(msg)

        await store.client.subscribe(parts_subject(node_id), cb=record)
        await store.client.flush()

    store.loop.run(subscribe(), 10)
    return seen


def test_a_batch_goes_to_each_owner_in_one_call(pair: list[ClusterStore]) -> None:
    n0, n1 = pair
    remote = topics_by_partition(pair, "n1", 3)
    (local,) = topics_by_partition(pair, "n0", 1)
    seen = spy_on_parts(n0, "n1")
    batch = [t for topic in [*remote, local] for t in timers(topic, 2, NOW_MS + 60_000)]
    results = n0.schedule(batch, NOW_MS)
    assert [(r.topic, r.id, r.replaced) for r in results] == [(t.topic, t.id, False) for t in batch]
    sent = lambda: [p for msg in seen for p, _ in decode_parts_call(msg.data)[1]]  # noqa: E731
    wait_for(lambda: len(sent()) >= len(remote), "every remote part seen")
    assert len(seen) == 1
    assert decode_parts_call(seen[0].data)[0] == "schedule"
    assert sorted(sent()) == sorted(n0.partition(t) for t in remote)
    assert all(n1.get(t.topic, t.id) is not None for t in batch if t.topic != local)
    cancelled = n0.cancel([(t.topic, t.id) for t in batch])
    assert [c.outcome for c in cancelled] == [CancelOutcome.REMOVED] * len(batch)


def test_each_part_is_answered_on_its_own(pair: list[ClusterStore]) -> None:
    """A part for a partition its receiver does not own answers PartitionMovedError and
    stores nothing; the receiver's own parts are stored."""
    n0, n1 = pair
    (theirs,) = topics_by_partition(pair, "n1", 1)
    (mine,) = topics_by_partition(pair, "n0", 1)
    parts = [
        (n0.partition(mine), (timers(mine, 2, NOW_MS + 60_000), NOW_MS)),
        (n0.partition(theirs), (timers(theirs, 2, NOW_MS + 60_000), NOW_MS)),
    ]
    sent = send_parts(n0.loop, n0.client, "n1", "schedule", parts)
    found = parts_answer(sent, "n1", "schedule", [p for p, _ in parts])
    assert isinstance(found[n0.partition(mine)], PartitionMovedError)
    stored = found[n0.partition(theirs)]
    assert [(r.topic, r.id) for r in stored] == [(theirs, "t0"), (theirs, "t1")]
    assert isinstance(stored[0], ScheduleResult)
    assert n0.get(mine, "t0") is None
    assert n1.get(theirs, "t0") is not None


def test_a_conflict_in_one_remote_part_is_the_batchs_error(pair: list[ClusterStore]) -> None:
    """The batch's error is its first failing partition's, named by the caller's index,
    while the other partitions' parts are stored (each part is one atomic write)."""
    n0, n1 = pair
    first, second = topics_by_partition(pair, "n1", 2)
    n0.schedule([NewTimer(second, "busy", NOW_MS - 10)], NOW_MS)
    assert [t.id for t in n1.due(NOW_MS, 10)] == ["busy"]  # in flight at n1
    batch = [NewTimer(first, "fine", NOW_MS + 5), NewTimer(second, "busy", NOW_MS + 5)]
    with pytest.raises(ConflictError) as caught:
        n0.schedule(batch, NOW_MS)
    assert caught.value.field == "timers[1]"
    assert n1.get(first, "fine") is not None


def test_a_partition_without_a_known_owner_waits_for_it(pair: list[ClusterStore]) -> None:
    """A part whose owner the caller does not know (its lease view says itself) goes
    through the store's ``call``, which reads the lease again and forwards it."""
    n0, n1 = pair
    (theirs,) = topics_by_partition(pair, "n1", 1)
    partition = n0.partition(theirs)
    held = n0.ownership.seen[partition]
    assert held.lease is not None
    stale = msgspec.structs.replace(held.lease, node_id="n0")
    n0.ownership.seen[partition] = msgspec.structs.replace(held, lease=stale)
    assert n0.ownership.lease_holder(partition) == "n0"
    results = n0.schedule(timers(theirs, 3, NOW_MS + 60_000), NOW_MS)
    assert [r.id for r in results] == ["t0", "t1", "t2"]
    assert n1.get(theirs, "t2") is not None
    assert n0.ownership.lease_holder(partition) == "n1"


def test_a_nodes_partitions_apply_one_at_a_time(pair: list[ClusterStore]) -> None:
    """Batches sent at once from several threads to both nodes (so n1's parts arrive by
    RPC while n0's own threads apply theirs): every apply on n1 runs holding n1's one
    apply lock, and no two overlap (cluster.partition: the GIL hand-offs between
    concurrent applies cost more than they gained)."""
    n0, n1 = pair
    topics = topics_by_partition(pair, "n1", 3)
    applying: list[int] = []
    seen: list[tuple[bool, int]] = []  # (lock held, applies running) at each apply
    for part in n1.ownership.owned.values():
        part.store.schedule = _watched(part.store.schedule, n1, applying, seen)  # type: ignore[method-assign]

    def send(store: ClusterStore, k: int) -> None:
        batch = [t for topic in topics for t in timers(topic, 20, NOW_MS + 60_000, f"{k}-")]
        store.schedule(batch, NOW_MS)

    with ThreadPoolExecutor(6) as pool:
        list(pool.map(send, [n0, n1] * 6, range(12)))
    assert len(seen) >= 12  # every batch applied at least once on n1 (in parts)
    assert all(held for held, _ in seen)
    assert max(running for _, running in seen) == 1


def _watched(
    schedule: Callable[..., list[ScheduleResult]],
    node: ClusterStore,
    applying: list[int],
    seen: list[tuple[bool, int]],
) -> Callable[..., list[ScheduleResult]]:
    def watched(*args: object) -> list[ScheduleResult]:
        applying.append(1)
        seen.append((node.ownership.apply_lock.locked(), len(applying)))
        try:
            return schedule(*args)
        finally:
            applying.pop()

    return watched
