"""Consumer groups on the embedded log: server-side committed offsets, Kafka-style.

A group's committed offset for a topic is the next offset it will read (0 for a new
group). It is kept in ``store.control`` (space ``group``, name ``<topic>/<group>``: names
follow the name rule, so ``/`` cannot occur in either), durable like every acknowledged
write. A commit never moves backwards unless forced, and never past the log end (409).
Lag is the log end offset minus the committed offset, exact.
"""

from __future__ import annotations

import threading

import msgspec

from storage.control import ControlStore
from storage.errors import ConflictError, InvalidInputError
from storage.names import validate_name

GROUP_SPACE = "group"
_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(int).decode


class GroupOffset(msgspec.Struct, frozen=True):
    group: str
    committed_offset: int
    lag: int


class GroupOffsets:
    """The one owner of committed offsets (reads and commits go through here)."""

    def __init__(self, control: ControlStore) -> None:
        self._control = control
        self._lock = threading.Lock()
        # every committed offset, mirrored in memory so /metrics never iterates the store
        self._known: dict[tuple[str, str], int] = {}
        for name, raw in control.scan(GROUP_SPACE, ""):
            topic, _, group = name.partition("/")
            self._known[(topic, group)] = _decode(raw)

    def committed_offsets(self) -> dict[tuple[str, str], int]:
        """(topic, group) -> committed offset, from memory (a copy)."""
        return dict(self._known)

    def committed(self, topic: str, group: str) -> int:
        validate_name("topic", topic)
        validate_name("group", group)
        raw = self._control.get(GROUP_SPACE, f"{topic}/{group}")
        return 0 if raw is None else _decode(raw)

    def commit(
        self, topic: str, group: str, offset: int, log_end: int, *, force: bool = False
    ) -> GroupOffset:
        """Commit ``offset`` (the next one to read) for ``group``; durable on return."""
        if offset < 0:
            raise InvalidInputError(f"offset must be at least 0, got {offset}", field="offset")
        if offset > log_end:
            raise ConflictError(
                f"offset {offset} is past the log end {log_end} of topic {topic}",
                state="past_log_end",
                field="offset",
            )
        with self._lock:
            current = self.committed(topic, group)
            if offset < current and not force:
                raise ConflictError(
                    f"offset {offset} is behind the committed offset {current} of group "
                    f'{group}; send "force": true to move it back',
                    state="behind_committed",
                    field="offset",
                )
            self._control.put(GROUP_SPACE, f"{topic}/{group}", _encode(offset))
            self._known[(topic, group)] = offset
        return GroupOffset(group, offset, max(0, log_end - offset))

    def groups(self, topic: str, log_end: int) -> list[GroupOffset]:
        validate_name("topic", topic)
        found = self._control.scan(GROUP_SPACE, f"{topic}/")
        return [
            GroupOffset(name.partition("/")[2], off, max(0, log_end - off))
            for name, off in ((name, _decode(raw)) for name, raw in found)
        ]
