"""Forwarding: a call for a partition this node does not own goes to its owner by NATS
request/reply on ``ts.rpc.<node_id>``; the answer, or the domain error re-raised as the
same class (with its field, state and problems), comes back.

A call is ``Call(method, partition, args)`` with ``args`` msgpack-encoded as the
method's argument tuple (``METHODS``); the reply is ``Reply(ok, result | error)``.
A batch's parts for one owner travel together on ``ts.rpc.<node_id>.parts`` as
``PartsCall(method, [(partition, args), ...])``, answered by a ``Reply`` whose result is
one ``Reply`` per part, in order (each part succeeds or fails on its own).
"""

from __future__ import annotations

from typing import Any

import msgspec

from cluster import errors as cluster_errors
from storage import errors as storage_errors
from storage.errors import (
    ConflictError,
    InvalidInputError,
    Problem,
    StoreFormatError,
    StoreOpenError,
    TimerStoreError,
)
from storage.protocol import (
    CancelResult,
    LoggedMessage,
    NewTimer,
    ScheduleResult,
    StoreStats,
    TimerPage,
    TimerView,
    TopicInfo,
)

SUBJECT_PREFIX = "ts.rpc."
CALL_TIMEOUT_S = 20.0  # longer than an append's deadline (a Raft election at the owner)

# method -> (argument tuple type, result type)
METHODS: dict[str, tuple[Any, Any]] = {
    "schedule": (tuple[list[NewTimer], int], list[ScheduleResult]),
    "cancel": (tuple[list[tuple[str, str]]], list[CancelResult]),
    "get": (tuple[str, str], TimerView | None),
    "list_pending": (
        tuple[int, int | None, str | None, int, str | None, int | None],
        TimerPage,
    ),
    "read_log": (tuple[str, int, int, int | None], list[LoggedMessage]),
    "dead_letters": (tuple[str | None, int, str | None, int | None], TimerPage),
    "replay_dead_letter": (tuple[str, str, int], ScheduleResult),
    "purge_dead_letters": (tuple[str | None], int),
    "topics": (tuple[()], list[TopicInfo]),
    "stats": (tuple[()], StoreStats),
    "count_pending_due_before": (tuple[list[int], int], list[int]),
}


def rpc_subject(node_id: str) -> str:
    return SUBJECT_PREFIX + node_id


def parts_subject(node_id: str) -> str:
    return SUBJECT_PREFIX + node_id + ".parts"


class Call(msgspec.Struct, array_like=True, frozen=True):
    method: str
    partition: int
    args: msgspec.Raw


class PartsCall(msgspec.Struct, array_like=True, frozen=True):
    method: str
    parts: list[tuple[int, msgspec.Raw]]


class WireError(msgspec.Struct, array_like=True, frozen=True):
    kind: str  # the class name
    message: str
    field: str | None = None
    state: str | None = None
    problems: list[tuple[str, str, int | None]] = []


class Reply(msgspec.Struct, array_like=True, frozen=True):
    ok: bool
    result: msgspec.Raw = msgspec.Raw(b"\xc0")
    error: WireError | None = None


_encode = msgspec.msgpack.Encoder().encode
_decode_call = msgspec.msgpack.Decoder(Call).decode
_decode_reply = msgspec.msgpack.Decoder(Reply).decode
_decode_parts_call = msgspec.msgpack.Decoder(PartsCall).decode
ERRORS: dict[str, type[TimerStoreError]] = {
    name: cls
    for module in (storage_errors, cluster_errors)
    for name, cls in vars(module).items()
    if isinstance(cls, type) and issubclass(cls, TimerStoreError)
}


def encode_call(method: str, partition: int, args: tuple[Any, ...]) -> bytes:
    return _encode(Call(method, partition, msgspec.Raw(_encode(args))))


def decode_call(data: bytes) -> tuple[str, int, tuple[Any, ...]]:
    call = _decode_call(data)
    if call.method not in METHODS:
        raise InvalidInputError(f"unknown cluster call {call.method!r}")
    args = msgspec.msgpack.decode(call.args, type=METHODS[call.method][0])
    return call.method, call.partition, args


def encode_parts_call(method: str, parts: list[tuple[int, tuple[Any, ...]]]) -> bytes:
    return _encode(PartsCall(method, [(p, msgspec.Raw(_encode(args))) for p, args in parts]))


def decode_parts_call(data: bytes) -> tuple[str, list[tuple[int, tuple[Any, ...]]]]:
    call = _decode_parts_call(data)
    if call.method not in METHODS:
        raise InvalidInputError(f"unknown cluster call {call.method!r}")
    args_type = METHODS[call.method][0]
    return call.method, [(p, msgspec.msgpack.decode(a, type=args_type)) for p, a in call.parts]


def encode_parts_reply(outcomes: list[Any]) -> bytes:
    """One reply per part: its result, or its TimerStoreError."""
    return encode_result(
        [
            msgspec.Raw(encode_error(o) if isinstance(o, TimerStoreError) else encode_result(o))
            for o in outcomes
        ]
    )


def decode_parts_reply(method: str, data: bytes) -> list[Any]:
    """Each part's result or its domain error (returned, not raised); an error of the
    call as a whole is raised."""
    reply = _decode_reply(data)
    if not reply.ok:
        assert reply.error is not None
        raise rebuild_error(reply.error)
    result_type = METHODS[method][1]
    return [
        msgspec.msgpack.decode(part.result, type=result_type)
        if part.ok
        else rebuild_error(part.error or WireError("TimerStoreError", "no error sent"))
        for part in msgspec.msgpack.decode(reply.result, type=list[Reply])
    ]


def encode_result(result: object) -> bytes:
    return _encode(Reply(True, msgspec.Raw(_encode(result))))


def encode_error(error: TimerStoreError) -> bytes:
    problems = [(p.field, p.message, p.index) for p in getattr(error, "problems", ())]
    wire = WireError(
        type(error).__name__, error.message, error.field, getattr(error, "state", None), problems
    )
    return _encode(Reply(False, error=wire))


def decode_reply(method: str, data: bytes) -> Any:
    """The call's result, or its domain error raised as the owner raised it."""
    reply = _decode_reply(data)
    if reply.ok:
        return msgspec.msgpack.decode(reply.result, type=METHODS[method][1])
    assert reply.error is not None
    raise rebuild_error(reply.error)


def rebuild_error(wire: WireError) -> TimerStoreError:
    cls = ERRORS.get(wire.kind, TimerStoreError)
    if issubclass(cls, ConflictError):
        return cls(wire.message, state=wire.state or "", field=wire.field)
    if issubclass(cls, InvalidInputError):
        problems = tuple(Problem(f, m, i) for f, m, i in wire.problems)
        return cls(wire.message, field=wire.field, problems=problems)
    if issubclass(cls, StoreFormatError):
        return StoreOpenError(wire.message)
    return cls(wire.message, field=wire.field)
