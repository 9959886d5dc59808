"""The history of a fault run (every client operation and its answer) and its checker.

An answer is *acknowledged* (2xx, or a definite 404/409), or *indeterminate* (a timeout, a
connection cut, a 503: the change may or may not have been made). The checker holds the
embedded topic logs, read at the end from every node, against the history:

- every timer whose schedule was acknowledged is in its topic's log exactly once, unless a
  cancel of it was acknowledged (204) or may have happened (indeterminate);
- no timer is in a log twice, and no timer whose cancel answered 204 is in one at all;
- none early: each message was delivered at or after its due time, and that due time is
  one a schedule of it asked for (acknowledged or indeterminate);
- a cancel answered 409 (too late) means the timer is in the log, and one answered 404
  (unknown) must not be of a timer that had to be delivered (a lost write);
- every topic's offsets are 0, 1, 2, ... and every node reads the same log.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

import msgspec

INDETERMINATE = 0  # the status recorded when no answer came


class Operation(msgspec.Struct, frozen=True):
    kind: str  # "schedule" (also a reschedule of an id scheduled before) or "cancel"
    topic: str
    id: str
    due_ms: int  # asked-for delivery time (schedule); 0 for a cancel
    status: int  # the HTTP status, or INDETERMINATE
    node: str
    started_ms: int


class History:
    """Operations appended by many client threads."""

    def __init__(self) -> None:
        self.operations: list[Operation] = []
        self._lock = threading.Lock()

    def record(self, operation: Operation) -> None:
        with self._lock:
            self.operations.append(operation)

    def snapshot(self) -> list[Operation]:
        with self._lock:
            return list(self.operations)


def acknowledged(status: int) -> bool:
    return 200 <= status < 300


def indeterminate(status: int) -> bool:
    return status == INDETERMINATE or status >= 500


def by_timer(operations: Iterable[Operation]) -> dict[tuple[str, str], list[Operation]]:
    """Each timer's operations in the order they happened: one client thread owns each
    timer id, and records an operation once its answer came."""
    out: dict[tuple[str, str], list[Operation]] = {}
    for op in operations:
        out.setdefault((op.topic, op.id), []).append(op)
    return out


def removed(op: Operation) -> bool:
    """A cancel that removed the timer, or may have."""
    return op.kind == "cancel" and (op.status == 204 or indeterminate(op.status))


def schedules(op: Operation) -> bool:
    """A schedule that (re)created the timer, or may have."""
    return op.kind == "schedule" and (acknowledged(op.status) or indeterminate(op.status))


def must_deliver(operations: Iterable[Operation]) -> set[tuple[str, str]]:
    """Timers that must be in the logs: an acknowledged schedule with no cancel after it
    that removed them or may have."""
    out = set()
    for key, ops in by_timer(operations).items():
        pending = False
        for op in ops:
            if op.kind == "schedule" and acknowledged(op.status):
                pending = True
            elif removed(op):
                pending = False
        if pending:
            out.add(key)
    return out


def check(
    operations: list[Operation], logs_by_node: dict[str, dict[str, list[dict[str, Any]]]]
) -> list[str]:
    """Every rule the history and the logs break, as sentences (empty: consistent)."""
    logs = next(iter(logs_by_node.values()))
    problems = [
        f"node {node} reads other topic logs than the first node"
        for node, other in logs_by_node.items()
        if other != logs
    ]
    delivered: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for topic, messages in logs.items():
        if [m["offset"] for m in messages] != list(range(len(messages))):
            problems.append(f"{topic}: offsets are not 0..{len(messages) - 1}")
        for m in messages:
            delivered.setdefault((topic, m["id"]), []).append(m)
    timers = by_timer(operations)
    for key, messages in delivered.items():
        problems += _delivery_problems(key, messages, timers.get(key, []))
    must = must_deliver(operations)
    problems += [f"{key} acknowledged but never delivered" for key in must - set(delivered)]
    for key, ops in timers.items():
        problems += _answer_problems(key, ops, key in delivered)
    return problems


def _delivery_problems(
    key: tuple[str, str], messages: list[dict[str, Any]], ops: list[Operation]
) -> list[str]:
    problems = []
    if len(messages) > 1:
        problems.append(f"{key} delivered {len(messages)} times")
    asked = [op.due_ms for op in ops if schedules(op)]
    for m in messages:
        if m["delivered_at_ms"] < m["deliver_at_ms"]:
            problems.append(f"{key} delivered early: {m}")
        if not asked or m["deliver_at_ms"] < min(asked):
            problems.append(f"{key} delivered at a time no schedule asked for: {m}")
    last_schedule = max((i for i, op in enumerate(ops) if schedules(op)), default=-1)
    if any(op.kind == "cancel" and op.status == 204 for op in ops[last_schedule + 1 :]):
        problems.append(f"{key} delivered after its cancel answered 204")
    return problems


def _answer_problems(key: tuple[str, str], ops: list[Operation], delivered: bool) -> list[str]:
    problems = []
    pending = False  # an acknowledged schedule, not removed since
    for op in ops:
        if op.kind == "cancel" and op.status == 409 and not delivered:
            problems.append(f"{key}: cancel answered 409 (too late) but it is not delivered")
        if op.kind == "cancel" and op.status == 404 and pending:
            problems.append(f"{key}: acknowledged, yet a cancel found no such timer")
        if op.kind == "schedule" and acknowledged(op.status):
            pending = True
        elif removed(op) or (op.kind == "cancel" and op.status == 409):
            pending = False
    return problems


def mirror_problems(
    logs: dict[str, list[dict[str, Any]]], mirrored: dict[str, list[tuple[int, str]]]
) -> list[str]:
    """The topic-log mirror against the embedded logs: each topic's ``(offset, id)`` in the
    same order, each once (the mirror follows the log, so it may only lag, never differ)."""
    problems = []
    for topic, messages in logs.items():
        expected = [(m["offset"], m["id"]) for m in messages]
        held = mirrored.get(topic, [])
        if held != expected:
            problems.append(
                f"{topic}: the mirror holds {len(held)} messages "
                f"({_first_difference(held, expected)}), the log {len(expected)}"
            )
    return problems


def _first_difference(held: list[tuple[int, str]], expected: list[tuple[int, str]]) -> str:
    for i, (got, want) in enumerate(zip(held, expected, strict=False)):
        if got != want:
            return f"at {i}: {got} where the log has {want}"
    return "a prefix of the log" if len(held) < len(expected) else "more than the log"
