"""The cluster's domain errors, in the storage hierarchy (``storage.errors``).

All derive from ``HandedOverError`` (a ``StoreClosedError``): the API answers 503 with
``Retry-After``, the engine takes it as work passed to another node, and a client's
retry reaches the partition's new owner (any node forwards to it). A node's own
router retries a call only on ``PartitionMovedError`` (the call was not made);
``UnsureWriteError`` it passes on (the change may have been made: a retry could answer
409 to a change that was in fact stored).
"""

from __future__ import annotations

from storage.errors import HandedOverError


class PartitionMovedError(HandedOverError):
    """This node no longer owns the partition (its lease is gone or another node took it)."""

    code = "unavailable"


class FencedError(PartitionMovedError):
    """JetStream refused an append: another owner has appended to the partition since
    (``Nats-Expected-Last-Subject-Sequence`` was stale, JetStream error 10071)."""

    code = "unavailable"


class UnsureWriteError(HandedOverError):
    """An append whose outcome is unknown: no try was acknowledged within its deadline, or
    a try went unanswered before JetStream refused a later one (that first try may be
    stored). The change may be in the changelog or not; the new owner knows."""

    code = "unavailable"
