"""The cluster's domain errors, in the storage hierarchy (``storage.errors``).

Both derive from ``StoreClosedError``: the API answers 503 with ``Retry-After``, and a
client's retry reaches the partition's new owner (any node forwards to it).
"""

from __future__ import annotations

from storage.errors import StoreClosedError


class PartitionMovedError(StoreClosedError):
    """This node no longer owns the partition (its lease is gone or another node took it)."""

    code = "unavailable"


class FencedError(PartitionMovedError):
    """JetStream refused an append: another owner has appended to the partition since
    (``Nats-Expected-Last-Subject-Sequence`` was stale, JetStream error 10071)."""

    code = "unavailable"
