"""A burst of timers all due at one instant: a local cluster against one single node, in
the same run.

One single node (no NATS) and then three nats-servers with three nodes on loopback, each
given the same ``--timers`` (default 1,000,000) all due at one instant, as
``bench.cluster_batch``'s bodies (1,000 timers over 64 topics, which hit every one of the
16 partitions) posted round-robin over the nodes. The due instant is set far enough
ahead that scheduling ends before it (the cluster's lead is sized from the single node's
scheduling time; a run whose scheduling overran it is an error, not a figure). Measured:
the seconds from the due instant until the topic logs (``GET /v1/topics``, log end
offsets, read from the first node) hold every timer, and with the log mirror on, until
the stream ``TIMERSTORE_LOG`` holds them too (the mirror follows the log). Then every
topic log is read in full and checked: as many entries as acknowledged timers, no id
twice, nothing pending.
Prints both times and the ratio (issue 34's target: the cluster within 2 times the single
node's), and writes a result file.
Run: ``python -m bench.cluster_burst [--timers 1000000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import zlib
from pathlib import Path
from typing import Any

import httpx
import nats
import nats.errors
from nats.js import JetStreamContext

from bench.cluster_batch import TOPICS, bodies, pending_seen, post_all
from bench.cluster_nodes import (
    PAGE,
    cluster_nodes,
    measured,
    read_log,
    running,
    side_by_side,
    single_node,
    write_result,
)
from bench.cluster_takeover import balanced
from cluster.mirror import LOG_STREAM
from cluster.natsd import NatsCluster
from cluster.node_process import NodeProcess
from cluster.settings import DEFAULT_PARTITIONS

POLL_S = 0.1
MIRROR_POLL_S = 0.25
SINGLE_LEAD_S = 15.0  # the single node's due instant: this long plus 1 s per 20,000 timers
CLUSTER_SLOWER = 8.0  # the cluster schedules 0.25 to 0.29 as fast (docs/cluster.md); a margin
DELIVERY_TIMEOUT_S = 1800.0
TARGET_RATIO = 2.0


def every_partition_hit() -> None:
    hit = {zlib.crc32(f"t{i}".encode()) % DEFAULT_PARTITIONS for i in range(TOPICS)}
    if len(hit) != DEFAULT_PARTITIONS:
        raise RuntimeError(f"the bench's topics hit only partitions {sorted(hit)}")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def log_entries(url: str) -> int:
    """The sum of every topic's log end offset (0 for a page refused while a partition moves)."""
    answer = httpx.get(f"{url}/v1/topics", params={"limit": PAGE}, timeout=30)
    if not answer.is_success:
        return 0
    return sum(int(t["log_end_offset"]) for t in answer.json()["topics"])


def wait_delivered(url: str, timers: int, due_ms: int) -> float:
    """Seconds from the due instant until the topic logs hold ``timers`` entries."""
    deadline = time.monotonic() + DELIVERY_TIMEOUT_S
    while log_entries(url) < timers:
        if time.monotonic() > deadline:
            raise RuntimeError(f"not delivered in {DELIVERY_TIMEOUT_S} s: {log_entries(url)}")
        time.sleep(POLL_S)
    return max(now_ms() - due_ms, 1) / 1000  # at least 1 ms: a ratio's divisor


def wait_mirrored(nats_url: str, timers: int, due_ms: int) -> tuple[float, int]:
    """Seconds from the due instant until the topic-log mirror (``TIMERSTORE_LOG``) holds
    ``timers`` messages, and how many it holds then (one connection for the whole wait)."""
    return asyncio.run(_wait_mirrored(nats_url, timers, due_ms))


async def _wait_mirrored(nats_url: str, timers: int, due_ms: int) -> tuple[float, int]:
    client = await nats.connect(nats_url, connect_timeout=5, max_reconnect_attempts=-1)
    js = client.jetstream(timeout=10)
    deadline = time.monotonic() + DELIVERY_TIMEOUT_S
    try:
        while (held := await _mirrored_messages(js)) < timers:
            if time.monotonic() > deadline:
                raise RuntimeError(f"not mirrored in {DELIVERY_TIMEOUT_S} s: {held}")
            await asyncio.sleep(MIRROR_POLL_S)
        return max(now_ms() - due_ms, 1) / 1000, held
    finally:
        await client.close()


async def _mirrored_messages(js: JetStreamContext) -> int:
    """Messages in the mirror; 0 while it cannot be asked (an election)."""
    try:
        info = await js.stream_info(LOG_STREAM)
    except (nats.errors.Error, TimeoutError):
        return 0
    return int(info.state.messages)


def check_logs(url: str) -> dict[str, int]:
    """Every topic log read in full: its entries, and the ids seen more than once."""
    entries = repeated = 0
    with httpx.Client(timeout=60) as http:
        for i in range(TOPICS):
            ids = [m["id"] for m in read_log(http, url, f"t{i}")]
            entries += len(ids)
            repeated += len(ids) - len(set(ids))
    return {"log_entries": entries, "ids_repeated": repeated}


def burst(
    nodes: list[NodeProcess],
    args: argparse.Namespace,
    lead_s: float,
    mirror_at: str | None = None,
) -> dict[str, Any]:
    """Schedule the burst due ``lead_s`` from now over ``nodes``, wait for the due
    instant, and time its delivery (and, given the NATS URL ``mirror_at``, its copy into
    the topic-log mirror); then check the logs."""
    batches = args.timers // args.per_batch
    with running(nodes):
        balanced(nodes)  # a body refused while a partition moves may be stored in part
        due_ms = now_ms() + int(lead_s * 1000)
        payloads = bodies(batches, args.per_batch, due_ms)
        urls = [n.url for n in nodes]
        seconds, resent = asyncio.run(post_all(urls, payloads, args.concurrency))
        del payloads
        overrun_ms = now_ms() - due_ms
        if overrun_ms >= 0:
            raise RuntimeError(
                f"scheduling ended {overrun_ms} ms after the due instant: use a longer lead"
            )
        time.sleep((due_ms - now_ms()) / 1000)
        delivered_s = wait_delivered(urls[0], batches * args.per_batch, due_ms)
        mirrored = {}
        if mirror_at is not None:
            mirror_s, held = wait_mirrored(mirror_at, batches * args.per_batch, due_ms)
            mirrored = {"mirrored_seconds": mirror_s, "mirror_messages": held}
        checked = check_logs(urls[0])
        pending = pending_seen(urls[0])
    return {
        "schedule_seconds": seconds,
        "resent": resent,
        "lead_seconds": lead_s,
        "delivered_seconds": delivered_s,
        "pending_after": pending,
        **mirrored,
        **checked,
    }


def measure(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    every_partition_hit()
    timers = args.timers // args.per_batch * args.per_batch
    single = burst(single_node(root), args, SINGLE_LEAD_S + timers / 20_000)
    cluster_lead_s = SINGLE_LEAD_S + CLUSTER_SLOWER * single["schedule_seconds"]
    with NatsCluster(root / "nats") as servers:
        mirror = args.log_mirror == "on"
        nodes = cluster_nodes(root, servers.urls, log_mirror=mirror)
        cluster = burst(nodes, args, cluster_lead_s, servers.urls[0] if mirror else None)
    ratio = cluster["delivered_seconds"] / single["delivered_seconds"]
    exact = all(
        side["log_entries"] == timers and side["ids_repeated"] == 0 and side["pending_after"] == 0
        for side in (single, cluster)
    )
    return {
        **side_by_side(timers, args, single, cluster),
        "ratio": ratio,
        "target_ratio": TARGET_RATIO,
        "target_met": ratio <= TARGET_RATIO,
        "exactly_once": exact,
    }


def main(argv: list[str] | None = None) -> None:
    result = measured(__doc__, measure, argv, ("--timers", 1_000_000))
    for side in ("single", "cluster"):
        r = result[side]
        print(
            f"{side}: {result['timers']:,} scheduled in {r['schedule_seconds']:.1f} s, "
            f"all delivered {r['delivered_seconds']:.2f} s after the due instant; "
            f"{r['log_entries']:,} log entries, {r['ids_repeated']} ids twice, "
            f"{r['pending_after']} pending after"
        )
    if "mirrored_seconds" in result["cluster"]:
        r = result["cluster"]
        print(
            f"cluster: {r['mirror_messages']:,} messages in {LOG_STREAM} "
            f"{r['mirrored_seconds']:.2f} s after the due instant"
        )
    met = "met" if result["target_met"] else "NOT met"
    print(f"cluster / single: {result['ratio']:.2f} (target at most {TARGET_RATIO}: {met})")
    print(
        "every acknowledged timer delivered exactly once"
        if result["exactly_once"]
        else "NOT every acknowledged timer delivered exactly once"
    )
    print(f"wrote {write_result('cluster_burst', result)}")


if __name__ == "__main__":
    main()
