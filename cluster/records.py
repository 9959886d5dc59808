"""The changelog's records: what a partition's owner appends to JetStream, one message each.

A record carries many operations (group commit: the requests that arrived while the
previous record of the partition was being acknowledged share the next one), encoded with
msgspec msgpack as a tagged union per operation. Operations carry *effects*, not requests:
the owner applies a request to its local RocksDB first (which decides conflicts, clamps and
offsets), and the operation records what that application did, with every time a replay
needs fixed (``key_ms`` of a scheduled or retried timer, the topic-log offsets of a
delivery). Applying the records in order to an empty RocksTimerStore (``cluster.apply``)
therefore rebuilds the same timers, dead letters and topic log. Field order is pinned
(``array_like``): a field may be added only at the end, with a default.
"""

from __future__ import annotations

import zlib

import msgspec


def partition_of(topic: str, partitions: int) -> int:
    """The partition of every timer of ``topic``: ``crc32(topic) % partitions``.

    By topic, not by (topic, id): the embedded topic log promises dense per-topic offsets
    0, 1, 2, ... and one consumer-group offset per topic. With a topic in one partition,
    its one owner assigns the offsets and no counter is shared between nodes. The cost:
    one hot topic cannot spread over nodes. crc32 is stable across processes and Python
    versions (``hash()`` is salted per process), and cheap.
    """
    return zlib.crc32(topic.encode()) % partitions


class ScheduledTimer(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """One timer as the owner stored it: ``key_ms`` is its key time after clamping."""

    topic: str
    id: str
    key_ms: int
    payload: bytes
    headers: dict[str, str]
    binary: bool


class DueRef(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """A due timer an outcome is about: its key and its stored record bytes."""

    key: bytes
    topic: str
    id: str
    key_ms: int
    raw: bytes


class ScheduleOp(msgspec.Struct, array_like=True, frozen=True, tag="s"):
    now_ms: int
    timers: list[ScheduledTimer]


class CancelOp(msgspec.Struct, array_like=True, frozen=True, tag="c"):
    idents: list[tuple[str, str]]  # only those the cancel removed


class DeliveredOp(msgspec.Struct, array_like=True, frozen=True, tag="d"):
    delivered_ms: int
    sink: str
    timers: list[DueRef]
    offsets: list[int]  # the topic-log offsets the owner assigned (-1: another sink)


class RetryOp(msgspec.Struct, array_like=True, frozen=True, tag="r"):
    key_ms: int  # where the owner moved them (retry time after clamping)
    attempt: bool
    timers: list[DueRef]


class DeadLetterOp(msgspec.Struct, array_like=True, frozen=True, tag="x"):
    now_ms: int
    error: str
    timers: list[DueRef]


class ReplayOp(msgspec.Struct, array_like=True, frozen=True, tag="p"):
    topic: str
    id: str
    key_ms: int  # the key time the replayed dead letter got


class PurgeOp(msgspec.Struct, array_like=True, frozen=True, tag="u"):
    topic: str | None


class FenceOp(msgspec.Struct, array_like=True, frozen=True, tag="f"):
    """A new owner's first record: from here on only ``node_id`` at ``epoch`` appends."""

    node_id: str
    epoch: int


Op = ScheduleOp | CancelOp | DeliveredOp | RetryOp | DeadLetterOp | ReplayOp | PurgeOp | FenceOp


class Record(msgspec.Struct, array_like=True, frozen=True):
    """One changelog message of one partition: its writer and its operations in order."""

    node_id: str
    epoch: int
    ops: list[Op]


encode_record = msgspec.msgpack.Encoder().encode
decode_record = msgspec.msgpack.Decoder(Record).decode
