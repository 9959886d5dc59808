"""Joining the cluster: the connection, the stream and buckets (created if missing), each
step retried while JetStream is busy (a loaded machine, an election) and named in the
error when it never answers."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import nats.errors
import nats.js.errors
from nats.aio.client import Client

from cluster.changelog import Changelog
from cluster.connect import JETSTREAM_TIMEOUT_S, connect
from cluster.control import CONTROL_BUCKET, KvControl
from cluster.leases import LEASES_BUCKET, NODES_BUCKET, LeaseTable, open_bucket
from cluster.loop import LoopThread
from cluster.mirror import LogMirror, NoMirror
from cluster.ownership import Ownership
from cluster.settings import ClusterSettings
from cluster.snapshots import SNAPSHOTS_BUCKET, Snapshots
from storage.errors import StoreOpenError
from storage.rocks.db import RocksSettings

T = TypeVar("T")
log = logging.getLogger(__name__)
CONNECT_WAIT_S = 30.0
STEP_WAIT_S = 60.0
_BUSY = (nats.errors.TimeoutError, nats.js.errors.ServiceUnavailableError, TimeoutError)
NO_PEERS_FOR_PLACEMENT = 10005  # "no suitable peers for placement": a server not seen yet


@dataclasses.dataclass
class ClusterParts:
    """What joining built, handed to the store that owns it from then on."""

    settings: ClusterSettings
    loop: LoopThread
    client: Client
    changelog: Changelog
    ownership: Ownership
    control: KvControl
    mirror: LogMirror | NoMirror


async def step(what: str, make: Callable[[], Awaitable[T]], wait_s: float = STEP_WAIT_S) -> T:
    """``make()`` awaited, again while JetStream does not answer, for up to ``wait_s``.

    Also again while JetStream refuses to place a replicated stream because a server is
    not seen online yet (``NO_PEERS_FOR_PLACEMENT``): nodes and nats-servers started
    together (``docker compose up``, a test) meet it while the servers still find one
    another, and after ``wait_s`` it is reported with JetStream's words (fewer servers
    than ``replicas`` gives the same refusal, for good)."""
    running = asyncio.get_running_loop()
    give_up_at = running.time() + wait_s
    while True:
        try:
            return await make()
        except _BUSY as e:
            if running.time() >= give_up_at:
                raise StoreOpenError(f"{what}: JetStream did not answer in {wait_s:.0f} s") from e
        except nats.js.errors.APIError as e:  # refused: name the step and JetStream's words
            if e.err_code != NO_PEERS_FOR_PLACEMENT or running.time() >= give_up_at:
                raise StoreOpenError(f"{what}: JetStream refused it: {e}") from e
            log.info("%s: waiting for JetStream's servers: %s", what, e.description)
        await asyncio.sleep(0.5)


async def join(cluster: ClusterSettings, rocks: RocksSettings, loop: LoopThread) -> ClusterParts:
    urls = ", ".join(cluster.nats_urls)
    try:
        client = await asyncio.wait_for(connect(cluster.nats_urls, cluster.node_id), CONNECT_WAIT_S)
    except TimeoutError as e:
        raise StoreOpenError(f"no NATS server at {urls} answered in {CONNECT_WAIT_S:.0f} s") from e
    try:
        return await _set_up(cluster, rocks, loop, client)
    except BaseException:
        await client.close()
        raise


async def _set_up(
    cluster: ClusterSettings, rocks: RocksSettings, loop: LoopThread, client: Client
) -> ClusterParts:
    js = client.jetstream(timeout=JETSTREAM_TIMEOUT_S)
    replicas = cluster.replicas
    changelog = Changelog(js, replicas)
    await step("the TIMERSTORE stream", changelog.ensure)
    leases = await step(LEASES_BUCKET, lambda: open_bucket(js, LEASES_BUCKET, replicas))
    nodes = await step(NODES_BUCKET, lambda: open_bucket(js, NODES_BUCKET, replicas))
    control = await step(CONTROL_BUCKET, lambda: open_bucket(js, CONTROL_BUCKET, replicas))
    mirror = (
        LogMirror(list(cluster.nats_urls), cluster.node_id, replicas)
        if cluster.log_mirror
        else NoMirror()
    )
    try:
        await step("the TIMERSTORE_LOG stream", mirror.ensure)
        snapshots = Snapshots(client, js, replicas, loop)
        await step(SNAPSHOTS_BUCKET, snapshots.ensure)
    except BaseException:
        await asyncio.to_thread(mirror.close)  # its own thread and connection
        raise
    table = LeaseTable(client, leases, nodes)
    ownership = Ownership(cluster, rocks, loop, changelog, table, snapshots)
    return ClusterParts(
        cluster, loop, client, changelog, ownership, KvControl(loop, client, control), mirror
    )
