"""The takeover after SIGKILL of a partition owner, measured on a real local cluster.

Three nats-servers and three nodes (default settings: 16 partitions, a 5 s lease) on
loopback. Each round schedules timers on the victim's topics due one second after the
kill, SIGKILLs the victim, and measures (1) the takeover: from the kill until another
node's ``/v1/cluster`` shows no partition owned by the victim, and (2) the victim's
timers: how long after the kill the last of them reached its topic log. Then the victim
is started again on its data dir for the next round.
Run: ``python -m bench.cluster_takeover [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import zlib
from pathlib import Path

import httpx

from bench.cluster_nodes import cluster_nodes, running
from cluster.leases import preferred_owner
from cluster.natsd import NatsCluster
from cluster.node_process import NodeProcess

TOPICS = [f"k-{i}" for i in range(96)]
PER_TOPIC = 50
POLL_S = 0.05
ROUND_TIMEOUT_S = 120.0


def owners(url: str) -> dict[int, str | None]:
    body = httpx.get(f"{url}/v1/cluster", timeout=10).json()
    return {o["partition"]: o["node_id"] for o in body["owners"]}


def victim_topics(url: str, victim: str) -> list[str]:
    owned = owners(url)
    return [t for t in TOPICS if owned[zlib.crc32(t.encode()) % len(owned)] == victim][:4]


def log_end(url: str, topic: str, offset: int = 0) -> int:
    """The topic log's next offset, read from ``offset`` on (a page is bounded)."""
    r = httpx.get(f"{url}/v1/topics/{topic}/messages", params={"offset": offset}, timeout=10)
    return int(r.json()["next_offset"]) if r.status_code == 200 else offset


def schedule(url: str, timers: list[dict[str, object]]) -> None:
    """The batch, again while a partition moves (503)."""
    for _ in range(100):
        r = httpx.post(f"{url}/v1/timers/batch", json={"timers": timers}, timeout=30)
        if r.is_success:
            return
        time.sleep(0.2)
    raise RuntimeError(f"the batch was refused: {r.status_code} {r.text}")


def balanced(nodes: list[NodeProcess]) -> None:
    """Until every partition sits with its preferred owner among ``nodes`` (as the first
    node sees it): with only "every node owns some partition", a hand-back still to come
    could move a partition in the middle of what the caller measures next."""
    ids = sorted(n.node_id for n in nodes)
    deadline = time.monotonic() + ROUND_TIMEOUT_S
    while not all(node == preferred_owner(p, ids) for p, node in owners(nodes[0].url).items()):
        if time.monotonic() > deadline:
            raise RuntimeError(f"not balanced in {ROUND_TIMEOUT_S} s: {owners(nodes[0].url)}")
        time.sleep(POLL_S)


def end_of_log(url: str, topic: str) -> int:
    offset = 0
    while (following := log_end(url, topic, offset)) != offset:
        offset = following
    return offset


def one_round(nodes: list[NodeProcess]) -> tuple[float, float]:
    survivor, victim = nodes[0], nodes[2]
    balanced(nodes)
    topics = victim_topics(survivor.url, victim.node_id)
    kill_ms = int(time.time() * 1000) + 500
    timers = [
        {"topic": t, "id": f"{kill_ms}-{k}", "deliver_at_ms": kill_ms + 1000}
        for t in topics
        for k in range(PER_TOPIC)
    ]
    before = {t: end_of_log(survivor.url, t) for t in topics}
    schedule(survivor.url, timers)
    time.sleep(max(0.0, kill_ms / 1000 - time.time()))
    killed = time.monotonic()
    victim.kill()
    takeover = delivered = 0.0
    deadline = time.monotonic() + ROUND_TIMEOUT_S
    while not (takeover and delivered):
        if time.monotonic() > deadline:
            raise RuntimeError(f"round not over in {ROUND_TIMEOUT_S} s: {takeover=} {delivered=}")
        if not takeover and victim.node_id not in owners(survivor.url).values():
            takeover = time.monotonic() - killed
        if not delivered and all(
            log_end(survivor.url, t, before[t]) >= before[t] + PER_TOPIC for t in topics
        ):
            delivered = time.monotonic() - killed
        time.sleep(POLL_S)
    victim.start()
    victim.wait_ready()
    return takeover, delivered


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as root, NatsCluster(Path(root) / "nats") as servers:
        nodes = cluster_nodes(Path(root), servers.urls)
        with running(nodes):
            results = [one_round(nodes) for _ in range(args.rounds)]
    for i, (takeover, delivered) in enumerate(results):
        print(f"round {i}: takeover {takeover:.2f} s, victim's timers delivered {delivered:.2f} s")
    print(
        f"median takeover {statistics.median(r[0] for r in results):.2f} s, "
        f"delivered {statistics.median(r[1] for r in results):.2f} s after the kill "
        "(timers due 1 s after it; lease 5 s)"
    )


if __name__ == "__main__":
    main()
