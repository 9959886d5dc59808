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

from cluster.natsd import NatsCluster, free_port
from cluster.node_process import NodeProcess

TOPICS = [f"k-{i}" for i in range(96)]
PER_TOPIC = 50
POLL_S = 0.05


def owners(url: str) -> dict[int, str | None]:
    body = httpx.get(f"{url}/v1/cluster", timeout=10).json()
    return {o["partition"]: o["node_id"] for o in body["owners"]}


def victim_topics(url: str, victim: str) -> list[str]:
    owned = owners(url)
    return [t for t in TOPICS if owned[zlib.crc32(t.encode()) % len(owned)] == victim][:4]


def log_size(url: str, topic: str) -> int:
    r = httpx.get(f"{url}/v1/topics/{topic}/messages", params={"offset": 0}, timeout=10)
    return int(r.json()["next_offset"]) if r.status_code == 200 else 0


def one_round(nodes: list[NodeProcess]) -> tuple[float, float]:
    survivor, victim = nodes[0], nodes[2]
    topics = victim_topics(survivor.url, victim.node_id)
    kill_ms = int(time.time() * 1000) + 500
    timers = [
        {"topic": t, "id": f"{kill_ms}-{k}", "deliver_at_ms": kill_ms + 1000}
        for t in topics
        for k in range(PER_TOPIC)
    ]
    before = {t: log_size(survivor.url, t) for t in topics}
    assert httpx.post(f"{survivor.url}/v1/timers/batch", json={"timers": timers}).is_success
    time.sleep(max(0.0, kill_ms / 1000 - time.time()))
    killed = time.monotonic()
    victim.kill()
    takeover = delivered = 0.0
    while not (takeover and delivered):
        if not takeover and victim.node_id not in owners(survivor.url).values():
            takeover = time.monotonic() - killed
        if not delivered and all(
            log_size(survivor.url, t) >= before[t] + PER_TOPIC for t in topics
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
        nodes = [
            NodeProcess(f"n{i}", free_port(), Path(root) / f"n{i}", servers.urls) for i in range(3)
        ]
        try:
            for node in nodes:
                node.start()
            for node in nodes:
                node.wait_ready()
            results = [one_round(nodes) for _ in range(args.rounds)]
        finally:
            for node in nodes:
                node.stop()
    for i, (takeover, delivered) in enumerate(results):
        print(f"round {i}: takeover {takeover:.2f} s, victim's timers delivered {delivered:.2f} s")
    print(
        f"median takeover {statistics.median(r[0] for r in results):.2f} s, "
        f"delivered {statistics.median(r[1] for r in results):.2f} s after the kill "
        "(timers due 1 s after it; lease 5 s)"
    )


if __name__ == "__main__":
    main()
