"""bench.cluster_batch at a tiny size: the single node and the cluster of three get the
same bodies, every acknowledged timer is pending afterwards on each, and the ratio is
computed from the two rates of the same run."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import msgspec
import pytest

from bench.cluster_batch import bodies, client_bodies, measure, routed_bodies
from bench.cluster_nodes import node_ids
from cluster.leases import preferred_owner
from cluster.records import partition_of
from cluster.settings import ClusterSettings

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def test_both_sides_hold_every_acknowledged_timer(tmp_path: Path) -> None:
    args = argparse.Namespace(
        batches=6, per_batch=50, concurrency=3, log_mirror="on", routed=False, client_routing=False
    )
    result = measure(tmp_path, args)
    assert result["timers"] == 300
    assert result["single"]["pending"] == 300
    assert result["cluster"]["pending"] == 300
    single, cluster = result["single"]["timers_per_s"], result["cluster"]["timers_per_s"]
    assert result["ratio"] == pytest.approx(cluster / single)
    assert single == pytest.approx(300 / result["single"]["seconds"])


def test_routed_bodies_go_whole_to_the_owner_of_their_topics(tmp_path: Path) -> None:
    """``--routed``: each body holds only topics of its node's partitions (the preferred
    owners once balanced), every node gets bodies, and both sides still hold every
    acknowledged timer."""
    ids, partitions = node_ids(), ClusterSettings().partitions
    routed = routed_bodies(6, 50, 1, ids, partitions)
    assert sorted({node for node, _ in routed}) == [0, 1, 2]
    for node, body in routed:
        topics = {t["topic"] for t in json.loads(body)["timers"]}
        owners = {preferred_owner(partition_of(t, partitions), ids) for t in topics}
        assert owners == {ids[node]}, (node, topics)
    args = argparse.Namespace(
        batches=6, per_batch=50, concurrency=3, log_mirror="off", routed=True, client_routing=False
    )
    result = measure(tmp_path, args)
    assert result["routed"] is True
    assert result["single"]["pending"] == result["cluster"]["pending"] == 300


def test_client_routing_splits_each_batch_by_owner_as_the_client_does(tmp_path: Path) -> None:
    """``--client-routing``: the single node gets each batch whole, the cluster one body
    per owner, each only of that owner's topics (msgpack, the client's encoding), and
    both sides hold every acknowledged timer."""
    ids, partitions = node_ids(), ClusterSettings().partitions
    whole, split = client_bodies(6, 50, 1, ids, partitions)
    assert [len(batch) for batch in whole] == [1] * 6
    round_robin = [json.loads(body)["timers"] for body in bodies(6, 50, 1)]
    assert [msgspec.msgpack.decode(b[0][1])["timers"] for b in whole] == round_robin
    assert [len(batch) for batch in split] == [3] * 6  # 50 timers over 64 topics: 3 owners
    for batch, (_, body) in zip(split, (b[0] for b in whole), strict=True):
        items = []
        for node, part in batch:
            timers = msgspec.msgpack.decode(part)["timers"]
            owners = {preferred_owner(partition_of(t["topic"], partitions), ids) for t in timers}
            assert owners == {ids[node]}, (node, timers)
            items += timers
        whole_items = msgspec.msgpack.decode(body)["timers"]
        assert sorted(items, key=str) == sorted(whole_items, key=str)  # the same timers
    args = argparse.Namespace(
        batches=6, per_batch=50, concurrency=3, log_mirror="off", routed=False, client_routing=True
    )
    result = measure(tmp_path, args)
    assert result["client_routing"] is True and result["cluster"]["bodies"] == 18
    assert result["single"]["pending"] == result["cluster"]["pending"] == 300
