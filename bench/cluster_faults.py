"""A randomized fault run in the Jepsen manner against a real local cluster.

Three nats-servers and three nodes on loopback. For ``--seconds``, client threads
schedule, reschedule and cancel timers (due 1 to 4 s ahead) through random nodes and
record every operation with its answer (``bench.cluster_history``), while a nemesis, one
fault at a time, SIGKILLs a node and starts it again, SIGSTOPs a node past its lease and
SIGCONTs it, or SIGKILLs a nats-server and restarts it. Then everything is healed, the
topic logs are read from every node once every timer that must be delivered is, and the
checker holds them against the history; the topic-log mirror (``TIMERSTORE_LOG``) must
then hold each topic's log, in order, each message once. Seeded: the same ``--seed`` makes the same
choices (the timing of a loaded machine still differs).
Run: ``python -m bench.cluster_faults --seconds 300 [--seed 7]``; the suite runs a short
one (``tests/cluster/test_e2e_faults.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import random
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import msgspec

from bench.cluster_history import (
    INDETERMINATE,
    History,
    Operation,
    check,
    mirror_problems,
    must_deliver,
)
from bench.cluster_nodes import read_log, read_mirror, write_result
from cluster.natsd import NatsCluster, free_port
from cluster.node_process import NodeProcess

TOPICS = [f"f-{i}" for i in range(8)]
CLIENTS = 3
REQUEST_TIMEOUT_S = 5.0
DRAIN_TIMEOUT_S = 180.0
MIRROR_TIMEOUT_S = 120.0


def now_ms() -> int:
    return int(time.time() * 1000)


class FaultRun:
    def __init__(self, root: Path, seed: int, lease_ms: int) -> None:
        self.root = root
        self.random = random.Random(seed)
        self.lease_ms = lease_ms
        self.history = History()
        self.stop = threading.Event()
        self.faults: list[str] = []
        self.servers: NatsCluster | None = None
        self.nodes: list[NodeProcess] = []

    def start(self) -> None:
        self.servers = NatsCluster(self.root / "nats", nodes=3)
        env = {"TIMERSTORE_CLUSTER__LEASE_MS": str(self.lease_ms)}
        for i in range(3):
            node = NodeProcess(f"n{i}", free_port(), self.root / f"n{i}", self.servers.urls, env)
            self.nodes.append(node)
            node.start()
        for node in self.nodes:
            node.wait_ready()

    def close(self) -> None:
        for node in self.nodes:
            node.request_stop()
        for node in self.nodes:
            node.wait_stopped()
        if self.servers is not None:
            self.servers.stop()

    # ------------------------------------------------------------------ clients
    def client(self, seed: int) -> None:
        rng = random.Random(seed)
        mine: list[tuple[str, str]] = []
        with httpx.Client(timeout=REQUEST_TIMEOUT_S) as http:
            for n in range(1_000_000):
                if self.stop.is_set():
                    return
                node = rng.choice(self.nodes)
                if mine and rng.random() < 0.3:
                    topic, timer_id = rng.choice(mine)
                    if rng.random() < 0.5:
                        self._cancel(http, node, topic, timer_id)
                        continue
                else:
                    topic, timer_id = rng.choice(TOPICS), f"c{seed}-{n}"
                if self._schedule(http, node, topic, timer_id, now_ms() + rng.randint(1000, 4000)):
                    mine.append((topic, timer_id))

    def _schedule(
        self, http: httpx.Client, node: NodeProcess, topic: str, timer_id: str, due_ms: int
    ) -> bool:
        body = {"topic": topic, "id": timer_id, "deliver_at_ms": due_ms}
        status = self._send(http, "POST", f"{node.url}/v1/timers", body)
        self.history.record(
            Operation("schedule", topic, timer_id, due_ms, status, node.node_id, now_ms())
        )
        return 200 <= status < 300

    def _cancel(self, http: httpx.Client, node: NodeProcess, topic: str, timer_id: str) -> None:
        status = self._send(http, "DELETE", f"{node.url}/v1/timers/{topic}/{timer_id}", None)
        self.history.record(Operation("cancel", topic, timer_id, 0, status, node.node_id, now_ms()))

    @staticmethod
    def _send(http: httpx.Client, method: str, url: str, body: Any) -> int:
        try:
            return http.request(method, url, json=body).status_code
        except httpx.HTTPError:
            return INDETERMINATE

    # ------------------------------------------------------------------ nemesis
    def nemesis(self) -> None:
        lease_s = self.lease_ms / 1000
        while not self.stop.wait(self.random.uniform(1.0, 3.0)):
            kind = self.random.choice(["kill-node", "pause-node", "kill-nats"])
            index = self.random.randrange(3)
            self.faults.append(f"{kind} {index}")
            if kind == "kill-node":
                self.nodes[index].kill()
                self.stop.wait(self.random.uniform(0.5, 2 * lease_s))
                self.nodes[index].start()
                self.nodes[index].wait_ready()
            elif kind == "pause-node":
                self.nodes[index].pause()
                self.stop.wait(self.random.uniform(lease_s, 3 * lease_s))
                self.nodes[index].resume()
            else:
                assert self.servers is not None
                self.servers.kill(index)
                self.stop.wait(self.random.uniform(0.5, 2 * lease_s))
                self.servers.restart(index)

    # ------------------------------------------------------------------ the run
    def run(self, seconds: float) -> list[str]:
        threads = [threading.Thread(target=self.client, args=(s,)) for s in range(CLIENTS)]
        threads.append(threading.Thread(target=self.nemesis))
        for thread in threads:
            thread.start()
        time.sleep(seconds)
        self.stop.set()
        for thread in threads:
            thread.join()
        for node in self.nodes:  # healed: every node up again, and ready
            node.resume()
            if node.pid is None:
                node.start()
        for node in self.nodes:
            node.wait_ready()
        logs = self.drained_logs()
        return check(self.history.snapshot(), logs) + self.mirror_problems()

    def mirror_problems(self) -> list[str]:
        """The topic-log mirror against the first node's logs, once it has caught up (or
        MIRROR_TIMEOUT_S passed: the problems name what it lacks). The logs are read again
        each time: a timer whose schedule was indeterminate may still be delivered after
        the drain, and the mirror then follows the log that holds it."""
        assert self.servers is not None
        deadline = time.monotonic() + MIRROR_TIMEOUT_S
        while True:
            mirrored = read_mirror(self.servers.urls, TOPICS)
            problems = mirror_problems(read_logs(self.nodes[0].url), mirrored)
            if not problems or time.monotonic() > deadline:
                return problems
            time.sleep(1.0)

    def drained_logs(self) -> dict[str, dict[str, list[dict[str, Any]]]]:
        """Every node's view of every topic log, once every timer that must be delivered
        is in the first node's (or DRAIN_TIMEOUT_S passed: the checker names the missing)."""
        needed = must_deliver(self.history.snapshot())
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        while True:
            logs = {n.node_id: read_logs(n.url) for n in self.nodes}
            first = next(iter(logs.values()))
            seen = {(t, m["id"]) for t, ms in first.items() for m in ms}
            settled = all(other == first for other in logs.values())
            if (needed <= seen and settled) or time.monotonic() > deadline:
                return logs
            time.sleep(0.5)


def read_logs(url: str) -> dict[str, list[dict[str, Any]]]:
    with httpx.Client(timeout=30) as http:
        return {topic: read_log(http, url, topic) for topic in TOPICS}


def fault_run(
    root: Path, seconds: float, seed: int, lease_ms: int = 2_000
) -> tuple[FaultRun, list[str]]:
    run = FaultRun(root, seed, lease_ms)
    try:
        run.start()
        return run, run.run(seconds)
    finally:
        run.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--lease-ms", type=int, default=2_000)
    parser.add_argument(
        "--keep-dir", type=Path, help="run under this dir and keep it (node and server logs)"
    )
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as stack:
        root = args.keep_dir or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        run, problems = fault_run(root, args.seconds, args.seed, args.lease_ms)
    operations = run.history.snapshot()
    statuses: dict[str, int] = {}
    for op in operations:
        statuses[f"{op.kind} {op.status}"] = statuses.get(f"{op.kind} {op.status}", 0) + 1
    print(f"{len(operations)} operations, {len(run.faults)} faults: {', '.join(run.faults)}")
    print(msgspec.json.encode(dict(sorted(statuses.items()))).decode())
    print(f"{len(problems)} problems" + "".join(f"\n  {p}" for p in problems[:50]))
    history = msgspec.to_builtins(operations)  # to study a failure
    result = {"seed": args.seed, "faults": run.faults, "problems": problems, "history": history}
    print(f"wrote {write_result('cluster_faults', result)}")


if __name__ == "__main__":
    main()
