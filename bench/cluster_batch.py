"""Batch schedules into a local cluster against one single node, in the same run.

One single node (no NATS) and then three nats-servers with three nodes on loopback, each
fed the same bodies: ``--batches`` bodies of ``--per-batch`` timers (64 topics, due an
hour ahead, server-made ids) as ``POST /v1/timers/batch``, ``--concurrency`` requests in
flight, spread round-robin over the nodes' URLs. A refused body (503 while a partition
moves) is sent again and counted. Prints timers/s of each and the cluster's ratio to the
single node (issue 34's target: at least 0.5), and writes a result file. With
``--routed`` each body holds only topics whose partitions its node owns and goes to that
node, as a client routing by partition would send them: no part is forwarded.
Run: ``python -m bench.cluster_batch [--batches 300] [--per-batch 1000] [--routed]``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import time
from pathlib import Path
from typing import Any

import httpx

from bench.cluster_nodes import (
    cluster_nodes,
    measured,
    node_ids,
    running,
    side_by_side,
    single_node,
    write_result,
)
from bench.cluster_takeover import balanced
from client import calls
from client.models import TimerSpec
from client.routing import OwnerMap, split_by_owner
from cluster.leases import preferred_owner
from cluster.natsd import NatsCluster
from cluster.node_process import NodeProcess
from cluster.records import partition_of
from cluster.settings import ClusterSettings

TOPICS = 64
Batch = list[tuple[int, bytes]]  # (node index, body) of each body a batch is sent as
RETRY_LIMIT = 100


def bodies(batches: int, per_batch: int, due_ms: int) -> list[bytes]:
    """The request bodies, encoded up front so the client's own work stays out of the rate.

    Each timer has a client-made id: a body refused with a 503 while a partition moves
    may be stored in part (a batch is atomic per partition), and its resend then
    replaces those timers instead of adding them a second time under new ids."""
    every = [f"t{i}" for i in range(TOPICS)]
    return [_body(b, per_batch, due_ms, every, b * per_batch) for b in range(batches)]


def routed_bodies(
    batches: int, per_batch: int, due_ms: int, node_ids: list[str], partitions: int
) -> list[tuple[int, bytes]]:
    """(node index, body) as a client routing by partition would send them: each body
    holds only topics of partitions its node owns once the cluster is balanced (the
    preferred owners of ``cluster.leases``), the bodies in turn for each node."""
    topics_of: list[list[str]] = [[] for _ in node_ids]
    for i in range(TOPICS):
        owner = preferred_owner(partition_of(f"t{i}", partitions), node_ids)
        topics_of[node_ids.index(str(owner))].append(f"t{i}")
    return [
        (b % len(node_ids), _body(b, per_batch, due_ms, topics_of[b % len(node_ids)], 0))
        for b in range(batches)
    ]


def client_specs(b: int, per_batch: int, due_ms: int) -> list[TimerSpec]:
    """Batch ``b`` as the client's TimerSpecs: the timers of ``bodies``' body ``b``."""
    return [
        TimerSpec(topic=f"t{(b * per_batch + i) % TOPICS}", id=f"b{b}-{i}", deliver_at_ms=due_ms)
        for i in range(per_batch)
    ]


def client_bodies(
    batches: int, per_batch: int, due_ms: int, node_ids: list[str], partitions: int
) -> tuple[list[Batch], list[Batch]]:
    """Each batch for the single node (one body) and for the cluster (one body per owner,
    split by ``client.routing`` over the preferred owners, as the cluster is once
    balanced), each body encoded by the client: [(node index, body), ...] per batch."""
    owner_of = [str(node_ids.index(str(preferred_owner(p, node_ids)))) for p in range(partitions)]
    owners = OwnerMap(tuple(owner_of), {}, time.monotonic())
    whole: list[Batch] = []
    split: list[Batch] = []
    for b in range(batches):
        specs = client_specs(b, per_batch, due_ms)
        whole.append([(0, _client_body(specs))])
        parts = split_by_owner(specs, owners)
        split.append([(int(str(p.url)), _client_body(p.specs)) for p in parts])
    return whole, split


def _client_body(specs: list[TimerSpec]) -> bytes:
    body = calls.schedule_many(specs).body
    assert body is not None
    return body


def _body(b: int, per_batch: int, due_ms: int, topics: list[str], first: int) -> bytes:
    """Body ``b``: timers ``b{b}-0``, ``b{b}-1``, ... over ``topics`` in turn from ``first``."""
    timers = [
        {"topic": topics[(first + i) % len(topics)], "id": f"b{b}-{i}", "deliver_at_ms": due_ms}
        for i in range(per_batch)
    ]
    return json.dumps({"timers": timers}).encode()


async def post_all(urls: list[str], payloads: list[bytes], concurrency: int) -> tuple[float, int]:
    """Seconds to have every body acknowledged, and how many were sent again."""
    jobs = [[job] for job in zip(itertools.cycle(urls), payloads, strict=False)]
    return await post_jobs(jobs, concurrency)


async def post_jobs(
    batches: list[list[tuple[str, bytes]]],
    concurrency: int,
    content_type: str = "application/json",
) -> tuple[float, int]:
    """Seconds to have every batch acknowledged, and how many bodies were sent again.

    A batch is one body, or the parts a routing client splits it into, sent at once as
    the async client sends them; ``concurrency`` batches are in flight."""
    queue = list(batches)
    resent = 0
    headers = {"Content-Type": content_type}

    async def post(client: httpx.AsyncClient, url: str, body: bytes) -> None:
        nonlocal resent
        for _ in range(RETRY_LIMIT):
            answer = await client.post(f"{url}/v1/timers/batch", content=body, headers=headers)
            if answer.is_success:
                return
            resent += 1
            await asyncio.sleep(0.2)
        raise RuntimeError(f"refused {RETRY_LIMIT} times: {answer.status_code}")

    async def worker(client: httpx.AsyncClient) -> None:
        while queue:
            await asyncio.gather(*(post(client, url, body) for url, body in queue.pop()))

    limits = httpx.Limits(max_connections=None)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        started = time.perf_counter()
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
        return time.perf_counter() - started, resent


def pending_seen(url: str) -> int:
    """Pending timers as ``/v1/stats`` of ``url`` counts them (every partition's, in a cluster)."""
    for _ in range(RETRY_LIMIT):
        answer = httpx.get(f"{url}/v1/stats", timeout=30)
        if answer.is_success:
            return int(answer.json()["pending"])
        time.sleep(0.2)  # 503 while a partition has no owner
    raise RuntimeError(f"/v1/stats refused {RETRY_LIMIT} times: {answer.status_code}")


def run_nodes(
    nodes: list[NodeProcess],
    batches: list[Batch],
    concurrency: int,
    content_type: str = "application/json",
) -> dict[str, Any]:
    """Post every batch's bodies to their nodes; the figures, and the pending count the
    last node sees afterwards (every acknowledged timer must be there)."""
    with running(nodes):
        balanced(nodes)  # no partition handed back while the bodies go in
        for node in nodes:  # and none still restoring what it was handed
            node.wait_ready()
        posts = [[(nodes[i % len(nodes)].url, body) for i, body in batch] for batch in batches]
        seconds, resent = asyncio.run(post_jobs(posts, concurrency, content_type))
        pending = pending_seen(nodes[-1].url)
    return {"seconds": seconds, "resent": resent, "pending": pending}


def measure(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The same batches on both sides: bodies round-robin over the nodes, or with
    ``--routed`` each to the node owning its topics (the single node gets them all either
    way), or with ``--client-routing`` as the client sends them to each."""
    due_ms = int(time.time() * 1000) + 3_600_000
    timers = args.batches * args.per_batch
    partitions = ClusterSettings().partitions  # the nodes run with the default count
    content_type = "application/json"
    whole: list[Batch]
    if args.client_routing:
        content_type = "application/msgpack"
        whole, split = client_bodies(args.batches, args.per_batch, due_ms, node_ids(), partitions)
    elif args.routed:
        routed = routed_bodies(args.batches, args.per_batch, due_ms, node_ids(), partitions)
        whole = split = [[job] for job in routed]
    else:
        whole = split = [[job] for job in enumerate(bodies(args.batches, args.per_batch, due_ms))]
    single = run_nodes(single_node(root), whole, args.concurrency, content_type)
    with NatsCluster(root / "nats") as servers:
        nodes = cluster_nodes(root, servers.urls, log_mirror=args.log_mirror == "on")
        cluster = run_nodes(nodes, split, args.concurrency, content_type)
    single["timers_per_s"] = timers / single["seconds"]
    cluster["timers_per_s"] = timers / cluster["seconds"]
    cluster["bodies"] = sum(len(batch) for batch in split)
    return {
        **side_by_side(timers, args, single, cluster),
        "routed": args.routed,
        "client_routing": args.client_routing,
        "ratio": cluster["timers_per_s"] / single["timers_per_s"],
    }


def main(argv: list[str] | None = None) -> None:
    routed = ("--routed", "each body only of topics its node owns, sent to that node")
    client = ("--client-routing", "each batch split by owner as client.routing splits it")
    result = measured(__doc__, measure, argv, ("--batches", 300), flags=[routed, client])
    print(f"single node: {result['single']['timers_per_s']:,.0f} timers/s")
    print(
        f"cluster of 3: {result['cluster']['timers_per_s']:,.0f} timers/s "
        f"({result['cluster']['resent']} bodies sent again)"
    )
    print(f"cluster / single: {result['ratio']:.2f} (target at least 0.5)")
    lost = [k for k in ("single", "cluster") if result[k]["pending"] != result["timers"]]
    if lost:
        print(f"NOT every acknowledged timer is pending on: {', '.join(lost)}")
    print(f"wrote {write_result('cluster_batch', result)}")


if __name__ == "__main__":
    main()
