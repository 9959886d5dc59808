"""Failures of real processes under a real cluster (three nats-servers, three nodes, a 2 s
lease): SIGKILL of an owner in the middle of its deliveries, SIGKILL of a nats-server,
SIGSTOP of an owner past its lease, a node back on its old data dir and on an empty one,
and cancels racing deliveries across a takeover. Each test has a cluster of its own.
"""

from __future__ import annotations

import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from client import TimerSpec, TimerStoreClient, Unavailable, spec
from cluster.natsd import NatsCluster
from cluster.node_process import NodeProcess
from tests.cluster.conftest import StartNodes
from tests.cluster.e2e import (
    delivered_once,
    owners,
    owns_none,
    read_log,
    schedule_batch,
    topics_owned_by,
    wait_for,
)

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
HOUR_MS = 3_600_000
CANDIDATES = [f"k-{i}" for i in range(96)]
Due = dict[tuple[str, str], int]


def balanced(nodes: list[NodeProcess]) -> None:
    ids = {n.node_id for n in nodes}
    wait_for("every node owns some partition", lambda: set(owners(nodes[0].url).values()) == ids)


def schedule(url: str, timers: list[dict[str, Any]], due: Due) -> None:
    """Schedule ``timers`` through ``url`` (again on a 503 while a partition moves) and
    record each acknowledged one's due time."""

    def post() -> httpx.Response | None:
        r = schedule_batch(url, timers)
        return r if r.status_code == 200 else None

    for t in wait_for(f"a batch of {len(timers)} acknowledged", post).json()["timers"]:
        due[(t["topic"], t["id"])] = t["deliver_at_ms"]


def spread(topics: list[str], prefix: str, count: int, start_ms: int, step_ms: int) -> list[Any]:
    return [
        {"topic": t, "id": f"{prefix}-{k}", "deliver_at_ms": start_ms + k * step_ms, "payload": t}
        for t in topics
        for k in range(count)
    ]


def now_ms() -> int:
    return int(time.time() * 1000)


def first_delivery(url: str, topics: list[str]) -> None:
    wait_for("a first delivery", lambda: any(read_log(url, t) for t in topics))


def under_way(nodes: list[NodeProcess], count: int, per_topic: int, step_ms: int) -> Due:
    """Once balanced: ``per_topic`` timers on each of ``count`` topics of ``nodes[2]``
    (the victim) due from 2 s on, scheduled through ``nodes[0]``; returns once the first
    of them is delivered."""
    balanced(nodes)
    topics = topics_owned_by(nodes[0].url, nodes[2].node_id, CANDIDATES, count)
    due: Due = {}
    schedule(nodes[0].url, spread(topics, "a", per_topic, now_ms() + 2_000, step_ms), due)
    first_delivery(nodes[0].url, topics)
    return due


def expected_of(due: Due) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for topic, timer_id in due:
        out.setdefault(topic, set()).add(timer_id)
    return out


def test_sigkill_of_an_owner_mid_delivery_loses_and_repeats_nothing(
    fresh_nats: NatsCluster, start_nodes: StartNodes
) -> None:
    nodes = start_nodes(fresh_nats)
    n0, n1, victim = nodes
    balanced(nodes)
    topics = topics_owned_by(n0.url, victim.node_id, CANDIDATES, 4)
    topics += topics_owned_by(n0.url, n1.node_id, CANDIDATES, 2)
    due: Due = {}
    start = now_ms() + 2_000
    schedule(n0.url, spread(topics, "a", 40, start, 100), due)
    cancelled = spread(topics[:2], "c", 10, now_ms() + 8_000, 200)  # cancelled long before
    schedule(n0.url, cancelled, {})
    for t in cancelled:  # acknowledged cancels: never delivered
        r = httpx.delete(f"{n1.url}/v1/timers/{t['topic']}/{t['id']}", timeout=30)
        assert r.status_code == 204, r.text
    first_delivery(n0.url, topics[:4])
    with TimerStoreClient(n0.url, route_batches=True, timeout_s=30) as routed:
        routed.schedule_many([spec(t, id="routed", delay_ms=HOUR_MS) for t in topics])
        victim.kill()
        routed_through_any_node(routed, [spec(t, id="late", delay_ms=HOUR_MS) for t in topics])
    wait_for("no partition owned by the killed node", lambda: owns_none(n0.url, victim.node_id))
    delivered_once(n1.url, expected_of(due), due)
    for t in topics:
        for timer_id in ("routed", "late"):
            got = httpx.get(f"{n1.url}/v1/timers/{t}/{timer_id}", timeout=30)
            assert got.status_code == 200 and got.json()["state"] == "pending", got.text


def routed_through_any_node(routed: TimerStoreClient, specs: list[TimerSpec]) -> None:
    """A routing client whose owner map still names the killed node: that URL refuses
    the connection, so its part goes to the client's node, which forwards it once a new
    owner holds the partitions (a 503 until then; sent again, bounded: same ids)."""
    for _ in range(30):
        try:
            routed.schedule_many(specs)
            return
        except Unavailable:
            continue  # each try waits up to 3 s at the forwarding node for an owner
    raise AssertionError("the killed node's part was not stored through another node")


def test_sigkill_of_a_nats_server_loses_no_acknowledged_write(
    fresh_nats: NatsCluster, start_nodes: StartNodes
) -> None:
    nodes = start_nodes(fresh_nats)
    later = now_ms() + 3_600_000
    pending: Due = {}
    for i, node in enumerate(nodes):
        schedule(node.url, spread([f"before-{i}"], "p", 20, later, 1), pending)
    fresh_nats.kill(0)
    for i, node in enumerate(nodes):  # the service goes on
        schedule(node.url, spread([f"after-{i}"], "p", 20, later, 1), pending)
    for node in nodes:
        for topic, timer_id in pending:

            def pending_there(url: str = node.url, t: str = topic, i: str = timer_id) -> bool:
                r = httpx.get(f"{url}/v1/timers/{t}/{i}", timeout=30)
                assert r.status_code in (200, 503), r.text  # never a 404: nothing lost
                return r.status_code == 200 and r.json()["state"] == "pending"

            wait_for(f"{topic}/{timer_id} pending on {node.node_id}", pending_there)
    due: Due = {}
    schedule(nodes[1].url, spread(["after-due"], "d", 20, now_ms() + 500, 10), due)
    delivered_once(nodes[2].url, expected_of(due), due)


def test_a_paused_owner_past_its_lease_appends_and_delivers_nothing_after_it(
    fresh_nats: NatsCluster, start_nodes: StartNodes
) -> None:
    nodes = start_nodes(fresh_nats)
    n0, n1, victim = nodes
    due = under_way(nodes, 4, 40, 100)
    topics = sorted({topic for topic, _ in due})
    victim.pause()
    wait_for("no partition owned by the paused node", lambda: owns_none(n0.url, victim.node_id))
    delivered_once(n1.url, expected_of(due), due)
    victim.resume()
    victim.wait_ready()
    schedule(n1.url, spread(topics, "b", 10, now_ms() + 500, 50), due)
    delivered_once(victim.url, expected_of(due), due)  # dense: no stale append in between


def test_a_node_comes_back_on_its_old_data_dir_and_on_an_empty_one(
    fresh_nats: NatsCluster, start_nodes: StartNodes
) -> None:
    nodes = start_nodes(fresh_nats)
    n0, _, n2 = nodes
    pending: Due = {}
    schedule(n0.url, spread(CANDIDATES[:24], "p", 5, now_ms() + 3_600_000, 1), pending)
    n2.kill()
    wait_for("no partition owned by the killed node", lambda: owns_none(n0.url, n2.node_id))
    for wipe in (False, True):
        if wipe:
            n2.stop()
            shutil.rmtree(n2.data_dir)
        n2.start()
        n2.wait_ready()
        balanced(nodes)
        for topic, timer_id in pending:
            r = httpx.get(f"{n2.url}/v1/timers/{topic}/{timer_id}", timeout=30)
            assert r.status_code == 200, r.text
            assert r.json()["deliver_at_ms"] == pending[(topic, timer_id)]
    due: Due = {}
    schedule(n0.url, spread(CANDIDATES[:6], "d", 10, now_ms() + 500, 10), due)
    delivered_once(n2.url, expected_of(due), due)


def cancel_until_answered(url: str, topic: str, timer_id: str) -> int:
    """204 or 409 (too late) or 404, after 503s while the partition moves."""

    def attempt() -> int | None:
        r = httpx.delete(f"{url}/v1/timers/{topic}/{timer_id}", timeout=30)
        return None if r.status_code == 503 else r.status_code

    return wait_for(f"an answer to cancel {topic}/{timer_id}", attempt)


def test_cancels_racing_deliveries_across_a_takeover_are_truthful(
    fresh_nats: NatsCluster, start_nodes: StartNodes
) -> None:
    nodes = start_nodes(fresh_nats)
    n0, n1, victim = nodes
    due = under_way(nodes, 3, 60, 50)
    with ThreadPoolExecutor(8) as pool:
        answers = pool.map(lambda key: (key, cancel_until_answered(n1.url, *key)), list(due))
        victim.kill()
        answered = dict(answers)
    assert set(answered.values()) <= {204, 409}, answered
    too_late = {k: v for k, v in due.items() if answered[k] == 409}
    delivered_once(n1.url, expected_of(too_late), too_late)
    for (topic, timer_id), status in answered.items():
        r = httpx.get(f"{n0.url}/v1/timers/{topic}/{timer_id}", timeout=30)
        if status == 204:
            assert r.status_code == 404, r.text  # cancelled: gone, never delivered
        else:
            assert r.json()["state"] == "delivered", r.text


def test_readyz_is_200_only_while_joined(fresh_nats: NatsCluster, start_nodes: StartNodes) -> None:
    [node] = start_nodes(fresh_nats, count=1)  # ready: joined and its partitions restored

    def readyz() -> int:
        return httpx.get(f"{node.url}/readyz", timeout=10).status_code

    for index in range(3):  # no NATS server left: not joined any more
        fresh_nats.kill(index)
    wait_for("/readyz 503 without NATS", lambda: readyz() == 503)
    assert httpx.get(f"{node.url}/healthz", timeout=10).status_code == 200  # alive all along
    fresh_nats.restart_stopped()
    wait_for("/readyz 200 once joined again", lambda: readyz() == 200)
