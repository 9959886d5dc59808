"""What the cluster benchmarks share: running a set of nodes for the length of a block,
reading a topic log through the REST API, and writing a result file."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import nats
import nats.errors
from nats.js import JetStreamContext

from cluster.mirror import LOG_STREAM, log_subject
from cluster.natsd import free_port
from cluster.node_process import NodeProcess

RESULTS_DIR = "bench/results"
PAGE = 1000  # the API's largest page (limits.max_page_limit)
REFUSALS = 50
REFUSED_PAUSE_S = 0.2
MIRROR_READ_IDLE_S = 1.0  # a topic's mirror is read until no message came for this long


def single_node(root: Path) -> list[NodeProcess]:
    """One node without NATS (a single node), under ``root/single``."""
    return [NodeProcess("single", free_port(), root / "single", [])]


def cluster_nodes(
    root: Path, nats_urls: Sequence[str], count: int = 3, *, log_mirror: bool = True
) -> list[NodeProcess]:
    """Nodes ``n0``, ``n1``, ... of a cluster on ``nats_urls``, under ``root/n<i>``."""
    env = {"TIMERSTORE_CLUSTER__LOG_MIRROR": "true" if log_mirror else "false"}
    return [
        NodeProcess(node_id, free_port(), root / node_id, nats_urls, extra_env=env)
        for node_id in node_ids(count)
    ]


def node_ids(count: int = 3) -> list[str]:
    """The ids ``cluster_nodes`` gives its nodes."""
    return [f"n{i}" for i in range(count)]


@contextmanager
def running(nodes: Sequence[NodeProcess]) -> Iterator[Sequence[NodeProcess]]:
    """Every node started and ready for the block; every one stopped after it (also when
    a start or the block fails)."""
    try:
        for node in nodes:
            node.start()
        for node in nodes:
            node.wait_ready()
        yield nodes
    finally:
        for node in nodes:
            node.request_stop()
        for node in nodes:
            node.wait_stopped()


def read_log(http: httpx.Client, url: str, topic: str) -> list[dict[str, Any]]:
    """Every message of the topic's log from offset 0, page by page. A refused page (a 503
    while the partition moves) is asked again up to REFUSALS times, then taken as the end."""
    messages: list[dict[str, Any]] = []
    refused = 0
    while True:
        r = http.get(
            f"{url}/v1/topics/{topic}/messages", params={"offset": len(messages), "limit": PAGE}
        )
        if r.status_code != 200 and refused < REFUSALS:
            refused += 1
            time.sleep(REFUSED_PAUSE_S)
            continue
        page = r.json()["messages"] if r.status_code == 200 else []
        if not page:
            return messages
        messages += page


Mirrored = dict[str, list[tuple[int, str]]]  # topic -> (offset, id) in stream order


def read_mirror(nats_urls: Sequence[str], topics: Sequence[str]) -> Mirrored:
    """Each topic's ``(offset, id)`` in the topic-log mirror, in stream order (a topic
    not read, e.g. while JetStream elects, is left out: the caller asks again)."""
    return asyncio.run(_read_mirror(list(nats_urls), topics))


async def _read_mirror(urls: list[str], topics: Sequence[str]) -> Mirrored:
    client = await nats.connect(servers=urls, connect_timeout=5, max_reconnect_attempts=3)
    held: Mirrored = {}
    try:
        js = client.jetstream(timeout=10)
        for topic in topics:
            with contextlib.suppress(nats.errors.Error, TimeoutError):
                held[topic] = await _mirrored(js, topic)
    finally:
        await client.close()
    return held


async def _mirrored(js: JetStreamContext, topic: str) -> list[tuple[int, str]]:
    sub = await js.subscribe(log_subject(topic), stream=LOG_STREAM, ordered_consumer=True)
    held: list[tuple[int, str]] = []
    try:
        while True:
            try:
                msg = await sub.next_msg(timeout=MIRROR_READ_IDLE_S)
            except nats.errors.TimeoutError:
                return held
            headers = msg.headers or {}
            held.append((int(headers["Timerstore-Offset"]), headers["Timerstore-Id"]))
    finally:
        await sub.unsubscribe()


def write_result(name: str, result: dict[str, Any]) -> str:
    """``bench/results/<name>-<UTC stamp>.json``; its path."""
    os.makedirs(RESULTS_DIR, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    path = os.path.join(RESULTS_DIR, f"{name}-{stamp}.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    return path


def measured(
    doc: str,
    measure: Callable[[Path, argparse.Namespace], dict[str, Any]],
    argv: list[str] | None,
    size: tuple[str, int],
    flags: Sequence[tuple[str, str]] = (),
) -> dict[str, Any]:
    """The command line of a cluster benchmark of bodies of timers (``size``: its option
    for how many, and the default; ``--per-batch``, ``--concurrency``; ``flags``: its own
    on/off options, (name, help)), measured in a temporary directory."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    for name, text in flags:
        parser.add_argument(name, action="store_true", help=text)
    parser.add_argument(size[0], type=int, default=size[1])
    parser.add_argument("--per-batch", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=6)
    parser.add_argument(
        "--log-mirror",
        choices=("on", "off"),
        default="on",
        help="the cluster's copy of delivered messages into TIMERSTORE_LOG (default on)",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as root:
        return measure(Path(root), args)


def side_by_side(
    timers: int, args: argparse.Namespace, single: dict[str, Any], cluster: dict[str, Any]
) -> dict[str, Any]:
    """The head of a result file: the size, the client's settings, and both sides' figures."""
    return {
        "timers": timers,
        "per_batch": args.per_batch,
        "concurrency": args.concurrency,
        "log_mirror": args.log_mirror,
        "single": single,
        "cluster": cluster,
    }
