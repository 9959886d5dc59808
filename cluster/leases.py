"""Partition leases and node liveness in JetStream KV buckets, and the rendezvous balance.

``ts_leases``, key ``p.<partition>``: ``Lease(node_id, epoch, expires_at_ms)``. A node
acquires a lease with ``create`` (none yet) or ``update(..., last=revision)`` of the
revision it read, so of two nodes racing for it one wins; the epoch rises by one on every
change of owner and never falls (a release keeps the owner and epoch and sets
``expires_at_ms`` 0). The lease is not the fence: JetStream's expected subject sequence is
(``cluster.changelog``); the lease says who should own a partition, and an owner whose
lease has expired on its own clock stops delivering before its renewal even fails.

``ts_nodes``, key ``<node_id>``: ``NodeBeat(url, heartbeat_ms)``, put every tick; a node is
alive while its heartbeat is younger than ``lease_ms``. Each partition's preferred owner
is the alive node with the highest rendezvous hash of (node, partition): when a node
joins or leaves, only the partitions it wins or held move.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging

import msgspec
import nats.js.errors
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import StorageType
from nats.js.kv import KeyValue

from cluster.connect import stream_subjects

log = logging.getLogger(__name__)
LEASES_BUCKET = "ts_leases"
NODES_BUCKET = "ts_nodes"


class Lease(msgspec.Struct, frozen=True):
    node_id: str
    epoch: int
    expires_at_ms: int


class NodeBeat(msgspec.Struct, frozen=True):
    url: str
    heartbeat_ms: int


class HeldLease(msgspec.Struct, frozen=True):
    """A lease as read, with the KV revision an update must name."""

    lease: Lease | None
    revision: int


def lease_key(partition: int) -> str:
    return f"p.{partition}"


def preferred_owner(partition: int, alive: list[str]) -> str | None:
    """Rendezvous (highest random weight) hashing: stable, and minimal moves."""
    if not alive:
        return None
    return max(alive, key=lambda node: hashlib.blake2b(f"{node}/{partition}".encode()).digest())


async def open_bucket(js: JetStreamContext, bucket: str, replicas: int) -> KeyValue:
    try:
        return await js.key_value(bucket)
    except nats.js.errors.BucketNotFoundError:
        return await js.create_key_value(
            bucket=bucket, history=1, replicas=replicas, storage=StorageType.FILE
        )


class LeaseTable:
    def __init__(self, client: Client, leases: KeyValue, nodes: KeyValue) -> None:
        self.client = client
        self.leases = leases
        self.nodes = nodes

    async def read(self, partition: int) -> HeldLease:
        try:
            entry = await self.leases.get(lease_key(partition))
        except nats.js.errors.KeyNotFoundError:
            return HeldLease(None, 0)
        value = msgspec.json.decode(entry.value or b"null", type=Lease | None)
        return HeldLease(value, int(entry.revision or 0))

    async def write(self, partition: int, held: HeldLease, lease: Lease) -> HeldLease | None:
        """Replace ``held`` by ``lease`` unless someone wrote since; None when they did."""
        data = msgspec.json.encode(lease)
        try:
            if held.revision == 0:
                revision = await self.leases.create(lease_key(partition), data)
            else:
                revision = await self.leases.update(lease_key(partition), data, last=held.revision)
        except (nats.js.errors.KeyWrongLastSequenceError, nats.js.errors.KeyNotFoundError):
            return None  # the second: nats-py's create found the key written, then not
        log.debug("lease %d: %s at revision %d (was %d)", partition, lease, revision, held.revision)
        return HeldLease(lease, int(revision))

    async def beat(self, node_id: str, beat: NodeBeat) -> None:
        await self.nodes.put(node_id, msgspec.json.encode(beat))

    async def members(self) -> dict[str, NodeBeat]:
        """Every node's last heartbeat: the bucket's keys from its stream's subjects, not
        a watcher consumer per tick."""
        prefix = f"$KV.{NODES_BUCKET}."
        subjects = await stream_subjects(self.client, f"KV_{NODES_BUCKET}", prefix + ">")
        names = [subject[len(prefix) :] for subject in subjects]
        beats = await asyncio.gather(*(self._beat_of(name) for name in names))
        return {name: beat for name, beat in zip(names, beats, strict=True) if beat is not None}

    async def _beat_of(self, name: str) -> NodeBeat | None:
        try:
            entry = await self.nodes.get(name)
        except nats.js.errors.KeyNotFoundError:  # deleted: the node left
            return None
        return msgspec.json.decode(entry.value, type=NodeBeat) if entry.value else None

    async def leave(self, node_id: str) -> None:
        """A clean stop: the node is gone from the nodes bucket at once."""
        await self.nodes.delete(node_id)
