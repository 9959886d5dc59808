"""Batches sent straight to each partition's owner: the cluster's partition-aware client.

Any node of a cluster takes any batch, splits it by partition and forwards the parts it
does not own to their owners over NATS (docs/cluster-design.md). That hop costs the
receiving node, the owner and the nats-servers CPU for two thirds of a batch spread over
three nodes. A client that knows the partition function and the owners (``GET
/v1/cluster``) sends each owner its part itself, as Kafka's and Redis Cluster's clients
do; a stale map costs nothing but the hop again, since a node forwards what it does not
own. The partition function is the server's (``cluster.records.partition_of``, part of
the cluster's documented contract): ``crc32(topic) % partitions``. It pays when each
owner's part stays large (about 1,000 timers or more): a node's cost is mostly a
JetStream record per partition a request touches, so parts of a few hundred gain nothing
over the hop they save (docs/cluster.md, "Throughput against a single node").

An advertised URL is used only once its own ``GET /v1/cluster`` answered as the node it
is said to be (``http://0.0.0.0:8080`` seen from another machine would reach a server
of its own, or none); a URL that refuses the connection later is left for the map's
lifetime, and its parts go to the client's base URL.

A routed batch is stored per part: each part (one owner's timers) all or nothing, as the
cluster stores a batch per partition. When a part is refused, the error names the items
by their index in the whole batch, and other parts may be stored; send the batch again
with client-made ids (a pending topic+id is replaced, not added twice).
"""

from __future__ import annotations

import re
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from client.errors import TimerStoreClientError
from client.models import BatchScheduled, ClusterView, ProblemItem, ScheduledTimer, TimerSpec

MAP_MAX_AGE_S = 5.0  # the owners are read again after this (a takeover moves some)
_ITEM = re.compile(r"timers\[(\d+)\]")


def partition_of(topic: str, partitions: int) -> int:
    """The partition of every timer of ``topic`` (the server's function)."""
    return zlib.crc32(topic.encode()) % partitions


@dataclass(frozen=True)
class Part:
    """One owner's timers: ``url`` None when no live owner is known (any node takes it)."""

    url: str | None
    indexes: list[int] = field(default_factory=list)
    specs: list[TimerSpec] = field(default_factory=list)


@dataclass(frozen=True)
class OwnerMap:
    """Each partition's owner URL (None: no live owner known), as read at ``read_at_s``;
    ``node_of`` names the node each URL should answer as (the clients check it)."""

    urls: tuple[str | None, ...]
    node_of: dict[str, str]
    read_at_s: float

    @classmethod
    def of(cls, view: ClusterView) -> OwnerMap:
        """The owners of ``view``; a single node's map routes nothing (one node: no hop)."""
        urls: list[str | None] = [None] * view.partitions
        if len(view.nodes) <= 1:
            return cls(tuple(urls), {}, time.monotonic())
        alive = {n.node_id: n.url for n in view.nodes if n.alive and n.url}
        for owner in view.owners:
            if owner.node_id is not None and 0 <= owner.partition < view.partitions:
                urls[owner.partition] = alive.get(owner.node_id)
        node_of = {url: node for node, url in alive.items()}
        return cls(tuple(urls), node_of, time.monotonic())

    @property
    def fresh(self) -> bool:
        return time.monotonic() - self.read_at_s < MAP_MAX_AGE_S

    def without(self, url: str) -> OwnerMap:
        """This map with ``url`` unreachable (its parts go to the client's base URL)."""
        return self.reaching(lambda u: u != url)

    def reaching(self, reaches: Callable[[str], bool]) -> OwnerMap:
        """This map with only the URLs ``reaches`` accepts."""
        urls = tuple(u if u is not None and reaches(u) else None for u in self.urls)
        return replace(self, urls=urls)


def split_by_owner(specs: Sequence[TimerSpec], owners: OwnerMap) -> list[Part]:
    """The parts, in the order of their first item; each keeps its items' order."""
    parts: dict[str | None, Part] = {}
    count = len(owners.urls)
    for index, spec in enumerate(specs):
        url = owners.urls[partition_of(spec.topic, count)] if count else None
        part = parts.setdefault(url, Part(url))
        part.indexes.append(index)
        part.specs.append(spec)
    return list(parts.values())


def merged(
    parts: Sequence[Part], answers: Sequence[BatchScheduled | BaseException]
) -> BatchScheduled:
    """The parts' answers as one, in the batch's order; the first failed part (in batch
    order) raises, a refusal with its items renumbered to the whole batch."""
    done: list[BatchScheduled] = []
    for part, answer in zip(parts, answers, strict=True):
        if isinstance(answer, TimerStoreClientError):
            raise renumbered(answer, part.indexes) from answer
        if isinstance(answer, BaseException):
            raise answer
        done.append(answer)
    timers: list[ScheduledTimer | None] = [None] * sum(len(p.indexes) for p in parts)
    for part, answer in zip(parts, done, strict=True):
        for index, timer in zip(part.indexes, answer.timers, strict=True):
            timers[index] = timer
    return BatchScheduled(
        scheduled=sum(a.scheduled for a in done), timers=[t for t in timers if t is not None]
    )


def renumbered(error: TimerStoreClientError, indexes: Sequence[int]) -> TimerStoreClientError:
    """``error`` of a part with ``timers[i]`` and item indexes named as in the whole batch."""

    def whole(text: str) -> str:
        return _ITEM.sub(lambda m: f"timers[{indexes[int(m.group(1))]}]", text)

    problems = tuple(
        ProblemItem(
            field=whole(p.field),
            message=whole(p.message),
            index=None if p.index is None else indexes[p.index],
        )
        for p in error.problems
    )
    return type(error)(
        error.status,
        error.code,
        whole(error.message),
        field=None if error.field is None else whole(error.field),
        state=error.state,
        problems=problems,
    )
