"""The partition-aware batch: the client's partition function is the server's, parts keep
their items' order, and a part's refusal names the items as in the whole batch.

(Against three real nodes: tests/cluster/test_e2e_forwarding.py and the SIGKILL test of
tests/cluster/test_e2e_failover.py.)
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from client import InvalidInput, TimerStoreClient, spec
from client.models import (
    BatchScheduled,
    ClusterNode,
    ClusterView,
    PartitionOwner,
    ProblemItem,
    ScheduledTimer,
    TimerSpec,
)
from client.routing import OwnerMap, Part, merged, partition_of, split_by_owner
from cluster.records import partition_of as server_partition_of

FAR_MS = 4_000_000_000_000


@given(st.text(max_size=40), st.integers(min_value=1, max_value=1024))
def test_the_client_partitions_as_the_server_does(topic: str, partitions: int) -> None:
    assert partition_of(topic, partitions) == server_partition_of(topic, partitions)


def three_nodes(partitions: int = 4) -> ClusterView:
    nodes = [ClusterNode(node_id=f"n{i}", url=f"http://n{i}:80", alive=i != 2) for i in range(3)]
    owners = [PartitionOwner(partition=p, node_id=f"n{p % 3}", epoch=1) for p in range(partitions)]
    owners[3] = PartitionOwner(partition=3, node_id=None, epoch=1)
    return ClusterView(node_id="n0", partitions=partitions, owners=owners, nodes=nodes)


def test_an_owner_map_routes_only_to_live_owners_with_urls() -> None:
    owners = OwnerMap.of(three_nodes())
    # partition 2's owner n2 is not alive, partition 3 has no owner: both go anywhere
    assert owners.urls == ("http://n0:80", "http://n1:80", None, None)
    assert owners.node_of == {"http://n0:80": "n0", "http://n1:80": "n1"}
    assert owners.without("http://n1:80").urls == ("http://n0:80", None, None, None)


def test_a_single_node_routes_nothing() -> None:
    single = ClusterView(
        node_id="local",
        partitions=16,
        owners=[PartitionOwner(partition=p, node_id="local", epoch=0) for p in range(16)],
        nodes=[ClusterNode(node_id="local", url="http://0.0.0.0:8080", alive=True)],
    )
    assert OwnerMap.of(single).urls == (None,) * 16


@given(st.lists(st.sampled_from(["a", "b", "c", "orders", "x.y"]), max_size=30))
def test_parts_hold_every_item_once_in_order_each_of_one_owner(topics: list[str]) -> None:
    owners = OwnerMap.of(three_nodes())
    specs = [TimerSpec(topic=t, id=str(i)) for i, t in enumerate(topics)]
    parts = split_by_owner(specs, owners)
    assert sorted(i for p in parts for i in p.indexes) == list(range(len(specs)))
    for part in parts:
        assert part.indexes == sorted(part.indexes)
        assert part.specs == [specs[i] for i in part.indexes]
        assert {owners.urls[partition_of(s.topic, 4)] for s in part.specs} == {part.url}
    assert [p.indexes[0] for p in parts] == sorted(p.indexes[0] for p in parts)


def test_answers_are_merged_in_the_batchs_order() -> None:
    parts = [Part("u0", [0, 2], []), Part("u1", [1], [])]
    answers = [
        BatchScheduled(
            scheduled=2, timers=[ScheduledTimer("t", "a", 1), ScheduledTimer("t", "c", 3)]
        ),
        BatchScheduled(scheduled=1, timers=[ScheduledTimer("u", "b", 2)]),
    ]
    whole = merged(parts, answers)
    assert whole.scheduled == 3
    assert [t.id for t in whole.timers] == ["a", "b", "c"]


def test_a_refused_part_names_its_items_as_in_the_whole_batch() -> None:
    parts = [Part("u0", [0, 1], []), Part("u1", [2, 5, 7], [])]
    refused = InvalidInput(
        422,
        "invalid",
        "timers[2].deliver_at_ms: out of range",
        field="timers[2].deliver_at_ms",
        problems=(ProblemItem(field="timers[2].deliver_at_ms", message="out of range", index=2),),
    )
    answers: list[BatchScheduled | BaseException] = [
        BatchScheduled(scheduled=2, timers=[]),
        refused,
    ]
    with pytest.raises(InvalidInput) as raised:
        merged(parts, answers)
    error = raised.value
    assert error.field == "timers[7].deliver_at_ms"
    assert error.message == "timers[7].deliver_at_ms: out of range"
    assert error.problems == (
        ProblemItem(field="timers[7].deliver_at_ms", message="out of range", index=7),
    )
    assert error.status == 422 and error.code == "invalid"


def test_a_routing_client_on_a_single_node_stores_the_batch_as_one(base_url: str) -> None:
    """A single node answers /v1/cluster as one node: the batch goes whole to it, and an
    invalid item refuses all of it, as without routing."""
    with TimerStoreClient(base_url, route_batches=True) as ts:
        specs = [spec(f"t{i % 5}", id=f"r{i}", deliver_at_ms=FAR_MS) for i in range(40)]
        done = ts.schedule_many(specs)
        assert [(t.topic, t.id) for t in done.timers] == [(s.topic, s.id) for s in specs]
        bad = [spec("t0", id="ok", deliver_at_ms=FAR_MS), TimerSpec(topic="t1", id="bad")]
        with pytest.raises(InvalidInput) as raised:
            ts.schedule_many(bad)
        assert [p.index for p in raised.value.problems] == [1]
        assert ts.get("t0", "r0").state == "pending"
        assert [t.id for t in ts.list_pending(topic="t0", limit=100).timers].count("ok") == 0
