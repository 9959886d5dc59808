"""A node that comes back with its data dir deleted: how long it takes to rebuild its
partitions from JetStream, per million pending timers, on a real local cluster.

Three nats-servers and three nodes (default settings) on loopback, ``--timers`` pending
timers (a day ahead, ``bench.cluster_batch``'s bodies over 64 topics). Three rounds, each:
SIGKILL node ``n2``, wait until the survivors own all its partitions, start it again,
and time from the start until its own ``/v1/cluster`` shows it holding the leases of the
partitions it owned before (*taken back*: start, join, the survivors' hand-back), and
until its ``/readyz`` answers 200 after that (*restored*: every one of them rebuilt):

1. ``kept``: on its old data dir (a short replay of the records after it);
2. ``replay``: on an empty data dir, rebuilt by replaying the changelog;
3. ``snapshot``: on an empty data dir, after each of its partitions took a snapshot
   (``SNAPSHOT_EVERY_RECORDS`` single-record schedules and cancels are sent to it first).

The node's log says how each partition was restored (from a snapshot, or a dirty dir
rebuilt). After each round every timer pending before must still be (``/v1/stats``).
Seconds per million count the timers in the rebuilt partitions.
Run: ``python -m bench.cluster_rebuild [--timers 1000000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import nats
import nats.js.errors

from bench.cluster_batch import TOPICS, bodies, pending_seen, post_all
from bench.cluster_nodes import cluster_nodes, measured, running, write_result
from bench.cluster_takeover import balanced, owners
from cluster.connect import stream_subjects
from cluster.natsd import NatsCluster
from cluster.node_process import NodeProcess
from cluster.ownership import SNAPSHOT_EVERY_RECORDS
from cluster.settings import DEFAULT_PARTITIONS
from cluster.snapshots import META_SUBJECTS, OBJECTS_STREAM, SNAPSHOTS_BUCKET, object_of_meta

POLL_S = 0.05
ROUND_TIMEOUT_S = 900.0
DAY_MS = 86_400_000


def partition_of(topic: str) -> int:
    return zlib.crc32(topic.encode()) % DEFAULT_PARTITIONS


def timers_in(partitions: set[int], timers: int) -> int:
    """How many of ``bodies``' timers (topic ``t<k % TOPICS>`` for the k-th) fall in them."""
    per_topic = [timers // TOPICS + (k < timers % TOPICS) for k in range(TOPICS)]
    return sum(n for k, n in enumerate(per_topic) if partition_of(f"t{k}") in partitions)


def owned_by(url: str, node_id: str) -> set[int]:
    return {p for p, owner in owners(url).items() if owner == node_id}


def wait_for(condition: Callable[[], bool], what: str, poll_s: float = POLL_S) -> None:
    deadline = time.monotonic() + ROUND_TIMEOUT_S
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {ROUND_TIMEOUT_S} s")
        time.sleep(poll_s)


def is_ready(node: NodeProcess) -> bool:
    try:
        return httpx.get(f"{node.url}/readyz", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def owns(node: NodeProcess, partitions: set[int]) -> bool:
    """The node's own view shows it owning ``partitions`` (it holds their leases)."""
    try:
        view = httpx.get(f"{node.url}/v1/cluster", timeout=5)
    except httpx.HTTPError:
        return False  # not listening yet
    if view.status_code != 200:
        return False  # joining
    mine = {o["partition"] for o in view.json()["owners"] if o["node_id"] == node.node_id}
    return partitions <= mine


def log_counts(node: NodeProcess, start: int) -> dict[str, int]:
    """What the node logged from byte ``start`` of its log on: restores from a snapshot, and
    local dirs found dirty (rebuilt from the stream instead)."""
    with node.log_path.open("rb") as log:
        log.seek(start)
        text = log.read().decode(errors="replace")
    return {
        "from_snapshot": text.count("restored from snapshot"),
        "dirty": text.count("rebuilding"),
    }


def restart_round(nodes: list[NodeProcess], wipe: bool) -> dict[str, Any]:
    """Kill the last node, wait for the takeover, (wipe its data dir,) start it again and
    time it: until it holds the leases of the partitions it owned before (``owned``), and
    until its /readyz answers 200 after that (``seconds``: every one of them restored)."""
    survivor, victim = nodes[0], nodes[-1]
    balanced(nodes)
    mine = owned_by(survivor.url, victim.node_id)
    victim.kill()
    wait_for(lambda: victim.node_id not in owners(survivor.url).values(), "takeover")
    if wipe:
        shutil.rmtree(victim.data_dir)
    log_start = victim.log_path.stat().st_size
    started = time.monotonic()
    victim.start()
    wait_for(lambda: owns(victim, mine), f"{victim.node_id} taking {sorted(mine)} back")
    owned_s = time.monotonic() - started
    wait_for(lambda: is_ready(victim), f"{victim.node_id} restoring {sorted(mine)}")
    seconds = time.monotonic() - started
    figures = {"seconds": seconds, "owned_seconds": owned_s, "restore_seconds": seconds - owned_s}
    return {**figures, "partitions": sorted(mine), **log_counts(victim, log_start)}


async def snapshot_partitions(urls: list[str]) -> set[int]:
    """The partitions with a snapshot in the Object Store (``p<partition>/<seq>``)."""
    client = await nats.connect(servers=urls)
    try:
        try:  # the stream's subjects: ObjectStore.list may miss objects (cluster.connect)
            metas = await stream_subjects(client, OBJECTS_STREAM, META_SUBJECTS)
            bucket = await client.jetstream().object_store(SNAPSHOTS_BUCKET)
        except nats.js.errors.NotFoundError:  # no bucket yet
            return set()
        partitions: set[int] = set()
        for name in map(object_of_meta, metas):
            try:
                await bucket.get_info(name)
            except nats.js.errors.ObjectNotFoundError:  # deleted
                continue
            partitions.add(int(name[1:].split("/")[0]))
        return partitions
    finally:
        await client.close()


async def churn(url: str, partitions: set[int], records: int) -> None:
    """``records`` single-record changes in each partition, sent to ``url`` one after the
    other per partition (so none share a record): schedules, each then cancelled."""
    topics = {partition_of(f"s{k}"): f"s{k}" for k in range(4 * DEFAULT_PARTITIONS)}
    due_ms = int(time.time() * 1000) + DAY_MS

    async def one_partition(client: httpx.AsyncClient, topic: str) -> None:
        for _ in range(records // 2):
            answer = await client.post(
                f"{url}/v1/timers", json={"topic": topic, "deliver_at_ms": due_ms}
            )
            answer.raise_for_status()
            gone = await client.delete(f"{url}/v1/timers/{topic}/{answer.json()['id']}")
            gone.raise_for_status()

    async with httpx.AsyncClient(timeout=60) as client:
        await asyncio.gather(*(one_partition(client, topics[p]) for p in partitions))


def snapshot_round(nodes: list[NodeProcess], servers: NatsCluster) -> dict[str, Any]:
    """Snapshots of the last node's partitions taken, then a restart on an empty dir."""
    victim = nodes[-1]
    balanced(nodes)
    mine = owned_by(victim.url, victim.node_id)
    asyncio.run(churn(victim.url, mine, SNAPSHOT_EVERY_RECORDS + 2))
    taken = lambda: mine <= asyncio.run(snapshot_partitions(servers.urls))  # noqa: E731
    wait_for(taken, "the snapshots", poll_s=1.0)
    return restart_round(nodes, wipe=True)


def measure(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    batches = args.timers // args.per_batch
    timers = batches * args.per_batch
    payloads = bodies(batches, args.per_batch, int(time.time() * 1000) + DAY_MS)
    rounds: dict[str, dict[str, Any]] = {}
    with NatsCluster(root / "nats") as servers:
        nodes = cluster_nodes(root, servers.urls, log_mirror=args.log_mirror == "on")
        with running(nodes):
            balanced(nodes)  # no partition moving while the bodies go in
            urls = [n.url for n in nodes]
            schedule_s, resent = asyncio.run(post_all(urls, payloads, args.concurrency))
            del payloads
            pending = pending_seen(urls[0])
            before = asyncio.run(snapshot_partitions(servers.urls))
            for name, wipe in (("kept", False), ("replay", True)):
                rounds[name] = restart_round(nodes, wipe)
                rounds[name]["pending_after"] = pending_seen(urls[-1])
            rounds["snapshot"] = snapshot_round(nodes, servers)
            rounds["snapshot"]["pending_after"] = pending_seen(urls[-1])
    mine = set(rounds["replay"]["partitions"])
    in_mine = timers_in(mine, timers)
    for figures in rounds.values():
        figures["seconds_per_million"] = figures["seconds"] / in_mine * 1e6
        figures["restore_seconds_per_million"] = figures["restore_seconds"] / in_mine * 1e6
    return {
        "timers": timers,
        "schedule_seconds": schedule_s,
        "bodies_resent": resent,
        "pending_before": pending,
        "victim_partitions": sorted(mine),
        "timers_in_victim_partitions": in_mine,
        "snapshots_before_replay": sorted(before & mine),
        "rounds": rounds,
        "all_pending_after": all(r["pending_after"] == pending for r in rounds.values()),
    }


def main(argv: list[str] | None = None) -> None:
    result = measured(__doc__, measure, argv, ("--timers", 1_000_000))
    print(
        f"{result['timers']:,} scheduled ({result['bodies_resent']} bodies sent again), "
        f"{result['pending_before']:,} pending; n2 rebuilds partitions "
        f"{result['victim_partitions']} holding {result['timers_in_victim_partitions']:,} of them"
    )
    for name, r in result["rounds"].items():
        print(
            f"{name}: its partitions taken back {r['owned_seconds']:.2f} s after its start, "
            f"restored {r['seconds']:.2f} s after it ({r['restore_seconds']:.2f} s after taking "
            f"them: {r['restore_seconds_per_million']:.1f} s per million; "
            f"{r['from_snapshot']} from a snapshot, {r['dirty']} dirty dirs); "
            f"{r['pending_after']:,} pending after"
        )
    if result["snapshots_before_replay"]:
        print(f"(the replay round had snapshots of {result['snapshots_before_replay']})")
    print(f"wrote {write_result('cluster_rebuild', result)}")


if __name__ == "__main__":
    main()
