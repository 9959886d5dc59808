"""A batch write (schedule, cancel) split by partition, without a thread or a request
per partition: the parts of partitions owned here are applied in the calling thread
(``cluster.local.write_parts``), the others go with one call per owner node
(``cluster.rpc_server.send_parts``), and every acknowledgement is awaited together.

A part whose partition has no owner yet, or moved meanwhile (PartitionMovedError: it
was not stored), is tried again on its own through the store's ``call``, which waits for
the partition's owner. Each partition's part is one atomic write at its owner, as before:
the batch's answer is the first failing partition's error (in the order the partitions
first appear in the batch), its item indexes renumbered to the caller's.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from nats.aio.client import Client

from cluster.errors import PartitionMovedError
from cluster.forwards import ForwardCounts
from cluster.listing import by_partition, renumbered
from cluster.local import write_parts
from cluster.loop import LoopThread
from cluster.ownership import Ownership
from cluster.partition import OwnedPartition
from cluster.rpc_server import parts_answer, send_parts
from storage.errors import TimerStoreError

Args = tuple[Any, ...]
Owned = dict[int, tuple[OwnedPartition, Args]]  # partition -> (its part here, the call's args)
ByOwner = dict[str, list[tuple[int, Args]]]  # owner node -> [(partition, the call's args)]
Call = Callable[..., Any]  # ClusterStore.call: (partition, method, *args) -> answer


class Batches:
    def __init__(
        self,
        node_id: str,
        loop: LoopThread,
        client: Client,
        ownership: Ownership,
        *,
        partition_of: Callable[[str], int],
        call: Call,
        fanout: ThreadPoolExecutor,
        forwards: ForwardCounts,
    ) -> None:
        self.node_id = node_id
        self.loop = loop
        self.client = client
        self.ownership = ownership
        self.partition_of = partition_of
        self.call = call
        self.fanout = fanout
        self.forwards = forwards

    def split(self, method: str, topics: list[str], items: Sequence[Any], *args: Any) -> list[Any]:
        """``method(part, *args)`` for each partition's part of ``items``; the answers put
        back in the items' order, or the first failing partition's error."""
        groups = by_partition(topics, self.partition_of)
        found = self.run(method, {p: ([items[i] for i in idx], *args) for p, idx in groups.items()})
        out: list[Any] = [None] * len(items)
        for p, idx in groups.items():
            answer = found[p]
            if isinstance(answer, TimerStoreError):
                raise renumbered(answer, idx) from answer
            for i, value in zip(idx, answer, strict=True):
                out[i] = value
        return out

    def run(self, method: str, calls: dict[int, Args]) -> dict[int, Any]:
        """Each partition's answer to ``method(*calls[partition])``, or its error."""
        owned, remote, unrouted = self._route(calls)
        for parts in remote.values():
            self.forwards.add(method, len(parts))
        sent = {
            owner: (send_parts(self.loop, self.client, owner, method, parts), parts)
            for owner, parts in remote.items()
        }
        found = dict(zip(owned, write_parts(method, list(owned.values())), strict=True))
        for owner, (request, parts) in sent.items():
            found.update(parts_answer(request, owner, method, [p for p, _ in parts]))
        moved = unrouted + [p for p, v in found.items() if isinstance(v, PartitionMovedError)]
        again: dict[int, Future[Any]] = {
            p: self.fanout.submit(self.call, p, method, *calls[p]) for p in moved
        }
        for p, answer in again.items():
            try:
                found[p] = answer.result()
            except TimerStoreError as e:
                found[p] = e
        return found

    def _route(self, calls: dict[int, Args]) -> tuple[Owned, ByOwner, list[int]]:
        """The parts owned here, the parts by owner node, and the partitions without a
        known owner (left to ``call``, which waits for one)."""
        owned: Owned = {}
        remote: dict[str, list[tuple[int, Args]]] = defaultdict(list)
        unrouted: list[int] = []
        for p, args in calls.items():
            part = self.ownership.owner(p)
            if part is not None:
                owned[p] = (part, args)
                continue
            owner = self.ownership.lease_holder(p)
            if owner is None or owner == self.node_id:
                unrouted.append(p)
            else:
                remote[owner].append((p, args))
        return owned, dict(remote), unrouted
