"""Three real nodes on three real nats-servers: any node takes any request, and the answer
is the single node's (read your writes, truthful cancel, one delivery into the topic log).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from client import AsyncTimerStoreClient, InvalidInput, TimerSpec, TimerStoreClient, spec
from cluster.node_process import NodeProcess
from cluster.records import partition_of
from tests.cluster.e2e import full_log, owners, schedule_batch, view, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
TOPICS = [f"orders-{i}" for i in range(24)]  # crc32 spreads them over the 16 partitions


def test_every_node_is_ready_and_every_partition_has_a_live_owner(
    cluster_nodes: list[NodeProcess],
) -> None:
    ids = {n.node_id for n in cluster_nodes}
    for node in cluster_nodes:
        # (it answers 503 again for a moment while it restores a partition it takes)
        wait_for(f"{node.node_id} ready", lambda u=node.url: httpx.get(f"{u}/readyz").is_success)
        seen = view(node.url)
        assert seen["node_id"] == node.node_id and seen["partitions"] == 16
        assert {m["url"] for m in seen["nodes"]} == {n.url for n in cluster_nodes}
        # alive = a heartbeat younger than the lease: a late one on a loaded machine is
        # a moment of "not alive", so wait for every node to be seen alive
        wait_for(
            f"{node.node_id} sees every node alive",
            lambda u=node.url: {m["node_id"] for m in view(u)["nodes"] if m["alive"]} == ids,
        )

    def agreed() -> bool:
        maps = [owners(n.url) for n in cluster_nodes]
        return all(m == maps[0] for m in maps) and set(maps[0].values()) == ids

    wait_for("the three nodes agree on one owner per partition, each owning some", agreed)


def test_a_timer_scheduled_on_one_node_is_pending_on_every_node(
    cluster_nodes: list[NodeProcess],
) -> None:
    for index, topic in enumerate(TOPICS):
        writer = cluster_nodes[index % 3]
        body = {"topic": topic, "id": "ryw", "delay_ms": 3_600_000, "payload": topic}
        r = httpx.post(f"{writer.url}/v1/timers", json=body, timeout=30)
        assert r.status_code == 201, r.text
        for reader in cluster_nodes:
            got = httpx.get(f"{reader.url}/v1/timers/{topic}/ryw", timeout=30)
            assert got.status_code == 200, (reader.node_id, got.text)
            assert got.json()["state"] == "pending"
            assert got.json()["deliver_at_ms"] == r.json()["deliver_at_ms"]


def test_cancel_through_any_node_is_truthful(cluster_nodes: list[NodeProcess]) -> None:
    n0, n1, n2 = cluster_nodes
    for topic in TOPICS[:8]:
        body = {"topic": topic, "id": "to-cancel", "delay_ms": 3_600_000}
        assert httpx.post(f"{n0.url}/v1/timers", json=body, timeout=30).status_code == 201
        assert httpx.delete(f"{n1.url}/v1/timers/{topic}/to-cancel", timeout=30).status_code == 204
        again = httpx.delete(f"{n2.url}/v1/timers/{topic}/to-cancel", timeout=30)
        assert again.status_code == 404, again.text
        assert httpx.get(f"{n0.url}/v1/timers/{topic}/to-cancel", timeout=30).status_code == 404


def test_a_batch_cancel_through_any_node_answers_each_identity_from_its_owner(
    cluster_nodes: list[NodeProcess],
) -> None:
    """One body over every partition: each part goes to its owner, and each identity gets
    its own truthful outcome, in the order asked (a delivered one: too_late)."""
    n0, n1, n2 = cluster_nodes
    timers = [{"topic": t, "id": "bc", "delay_ms": 3_600_000} for t in TOPICS]
    assert schedule_batch(n0.url, timers).status_code == 200
    done = {"topic": TOPICS[0], "id": "bc-due", "delay_ms": 0}
    assert httpx.post(f"{n0.url}/v1/timers", json=done, timeout=30).status_code == 201
    wait_for(
        "the due timer delivered",
        lambda: httpx.get(f"{n2.url}/v1/timers/{TOPICS[0]}/bc-due").json()["state"] == "delivered",
    )
    asked = [(t, "bc") for t in TOPICS[::2]] + [(TOPICS[1], "never"), (TOPICS[0], "bc")]
    asked.append((TOPICS[0], "bc-due"))
    body = {"timers": [{"topic": t, "id": i} for t, i in asked]}
    r = httpx.post(f"{n1.url}/v1/timers/cancel", json=body, timeout=30)
    assert r.status_code == 200, r.text
    answers = r.json()["timers"]
    assert [(a["topic"], a["id"]) for a in answers] == asked
    removed = len(TOPICS[::2])
    assert [a["outcome"] for a in answers] == ["cancelled"] * removed + ["unknown"] * 2 + [
        "too_late"
    ]
    assert answers[-1]["state"] == "delivered" and r.json()["cancelled"] == removed
    for i, topic in enumerate(TOPICS):
        got = httpx.get(f"{n2.url}/v1/timers/{topic}/bc", timeout=30)
        assert got.status_code == (404 if i % 2 == 0 else 200), (topic, got.text)


def test_due_timers_reach_each_topic_log_once_and_read_the_same_from_every_node(
    cluster_nodes: list[NodeProcess],
) -> None:
    topics = [f"due-{i}" for i in range(6)]
    expected: dict[str, set[str]] = {t: set() for t in topics}
    for round_ in range(3):
        timers = [
            {"topic": t, "id": f"r{round_}-{k}", "delay_ms": 500, "payload": "x"}
            for t in topics
            for k in range(10)
        ]
        r = schedule_batch(cluster_nodes[round_].url, timers)
        assert r.status_code == 200, r.text
        for t in timers:
            expected[t["topic"]].add(t["id"])
    for topic in topics:
        logs = [full_log(node.url, topic, 30) for node in cluster_nodes]
        assert logs[0] == logs[1] == logs[2]
        assert [m["offset"] for m in logs[0]] == list(range(30))
        assert sorted(m["id"] for m in logs[0]) == sorted(expected[topic])  # each once
        assert all(m["delivered_at_ms"] >= m["deliver_at_ms"] for m in logs[0])  # none early


def _gauges(url: str, name: str, label: str) -> dict[str, float]:
    """Each series of gauge ``name`` on the node's /metrics, by the value of ``label``."""
    families = text_string_to_metric_families(httpx.get(f"{url}/metrics", timeout=30).text)
    found = next((f for f in families if f.name == name), None)
    return {} if found is None else {s.labels.get(label, ""): s.value for s in found.samples}


def test_each_node_reports_the_partitions_it_owns_and_together_they_are_the_cluster(
    cluster_nodes: list[NodeProcess],
) -> None:
    """Gauges are per node (owned partitions, forwarding nothing): summed over the nodes
    they are the cluster's, while /v1/stats on any node answers for the whole cluster."""
    topics = [f"gauged-{i}" for i in range(24)]
    timers = [
        {"topic": t, "delay_ms": 3_600_000} for i, t in enumerate(topics) for _ in range(i + 1)
    ]
    assert schedule_batch(cluster_nodes[1].url, timers).status_code == 200

    def each_reports_its_own() -> bool:
        """(probed again if a partition moves between the owners read and the scrapes)"""
        owner = {t: owners(cluster_nodes[0].url)[partition_of(t, 16)] for t in topics}
        assert len(set(owner.values())) == 3  # the 24 topics land on every node
        for node in cluster_nodes:
            pending = _gauges(node.url, "timerstore_pending_timers", "topic")
            mine = {t: int(pending[t]) for t in topics if t in pending}
            if mine != {t: i + 1 for i, t in enumerate(topics) if owner[t] == node.node_id}:
                return False
        return True

    wait_for("each node's gauges to show its own partitions' timers", each_reports_its_own)
    for node in cluster_nodes:
        whole = httpx.get(f"{node.url}/v1/stats", timeout=30).json()
        assert {t: whole["pending_by_topic"][t] for t in topics} == {
            t: i + 1 for i, t in enumerate(topics)
        }

    def snapshots_add_up() -> bool:
        """The due-time buckets of each node's last snapshot (every 10 s) sum to the
        cluster's pending count, with each node's snapshot taken after the schedule."""
        total = httpx.get(f"{cluster_nodes[2].url}/v1/stats", timeout=30).json()["pending"]
        counted = 0.0
        for node in cluster_nodes:
            taken = _gauges(node.url, "timerstore_stats_snapshot_timestamp_seconds", "x")
            buckets = _gauges(node.url, "timerstore_pending_due_timers", "due")
            if not taken or min(taken.values()) < scheduled_s:
                return False
            counted += sum(buckets.values())
        return counted == total

    scheduled_s = time.time()
    wait_for("the nodes' snapshots to add up to the cluster's pending", snapshots_add_up)


def _forwarded(nodes: list[NodeProcess]) -> float:
    """Batch parts and calls of ``schedule`` forwarded to an owner, summed over the nodes."""
    name = "timerstore_cluster_forwarded_parts"
    return sum(_gauges(n.url, name, "method").get("schedule", 0.0) for n in nodes)


def test_a_routing_client_sends_each_owner_its_part_and_nothing_is_forwarded(
    cluster_nodes: list[NodeProcess],
) -> None:
    topics = [f"routed-{i}" for i in range(24)]
    specs = [spec(t, id=f"r{k}", delay_ms=3_600_000) for k in range(5) for t in topics]
    first = cluster_nodes[0].url
    with TimerStoreClient(first, route_batches=True, timeout_s=30) as routed:
        for _ in range(3):  # again if a partition moved meanwhile (then parts are forwarded)
            owners_before, before = owners(first), _forwarded(cluster_nodes)
            done = routed.schedule_many(specs)
            after = _forwarded(cluster_nodes)
            if owners(first) == owners_before:
                break
        assert after == before
    assert [(t.topic, t.id) for t in done.timers] == [(s.topic, s.id) for s in specs]
    for node in cluster_nodes:  # read your writes, from every node
        for t in topics[:6]:
            got = httpx.get(f"{node.url}/v1/timers/{t}/r4", timeout=30)
            assert got.status_code == 200 and got.json()["state"] == "pending", got.text
    with TimerStoreClient(first, timeout_s=30) as plain:  # the counter counts forwards
        plain.schedule_many([spec(t, id="plain", delay_ms=3_600_000) for t in topics])
    assert _forwarded(cluster_nodes) > after


def test_a_routed_batch_refused_in_one_part_names_the_item_as_in_the_batch(
    cluster_nodes: list[NodeProcess],
) -> None:
    """Each owner's part is stored or refused on its own; the refusal names the item by
    its index in the whole batch, not in its part."""
    specs = [spec(f"routed-{i}", id="x", delay_ms=3_600_000) for i in range(24)]
    specs.append(TimerSpec(topic="routed-5", id="no-time"))  # neither deliver_at nor delay

    async def send() -> InvalidInput:
        url = cluster_nodes[1].url
        async with AsyncTimerStoreClient(url, route_batches=True, timeout_s=30) as ts:
            with pytest.raises(InvalidInput) as raised:
                await ts.schedule_many(specs)
            return raised.value

    refused = asyncio.run(send())
    assert [p.index for p in refused.problems] == [24]
    assert all(p.field.startswith("timers[24]") for p in refused.problems)


def test_the_admin_ingest_is_refused_in_a_cluster(cluster_nodes: list[NodeProcess]) -> None:
    node = cluster_nodes[0]
    stage = Path(node.data_dir) / "staging" / "bulk-1"
    stage.mkdir(parents=True)
    r = httpx.post(f"{node.url}/v1/admin/ingest", json={"stage_dir": "bulk-1"}, timeout=30)
    assert r.status_code == 409, r.text
    assert "the cluster does not ingest SST files" in r.json()["error"]["message"]
