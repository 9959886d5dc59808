"""Per-topic consume queues over the message log: the topic log's offset index.

RocketMQ delivers a due message into the CommitLog under its real topic and consumers
find it through that topic's ConsumeQueue. Here a delivery is a ``DeliveredRec`` in the
message log and ``cq/<topic>`` holds one 16-byte entry per topic offset: the record's
position (8) and size (4), padded. Entries are written after the frame, so recovery
re-appends whatever a crash cut off (an entry is keyed by its offset: idempotent).

A topic's file is named by the topic itself, except ``.`` and ``..`` (valid names, but
the directory itself and its parent as file names): they get ``%2E`` and ``%2E%2E``,
names no topic can have (``%`` is not allowed in a name), so every other topic keeps
its file name.
"""

from __future__ import annotations

import os
import struct

from storage.wheel.counters import WheelCounters

ENTRY = struct.Struct(">QI4x")
_FILE_OF_TOPIC = {".": "%2E", "..": "%2E%2E"}
_TOPIC_OF_FILE = {file: topic for topic, file in _FILE_OF_TOPIC.items()}


class ConsumeQueues:
    def __init__(self, directory: str, counters: WheelCounters) -> None:
        self.directory = directory
        self.counters = counters
        os.makedirs(directory, exist_ok=True)
        self._fds: dict[str, int] = {}
        self._lengths: dict[str, int] = {}
        self._dirty: set[str] = set()
        for name in os.listdir(directory):
            self._open(_TOPIC_OF_FILE.get(name, name))

    def _open(self, topic: str) -> int:
        fd = self._fds.get(topic)
        if fd is None:
            name = _FILE_OF_TOPIC.get(topic, topic)
            fd = os.open(os.path.join(self.directory, name), os.O_RDWR | os.O_CREAT, 0o644)
            size = os.fstat(fd).st_size
            if size % ENTRY.size:  # a torn entry: recovery appends it again
                os.ftruncate(fd, size - size % ENTRY.size)
            self._fds[topic] = fd
            self._lengths[topic] = size // ENTRY.size
        return fd

    def topics(self) -> list[str]:
        return sorted(self._lengths)

    def length(self, topic: str) -> int:
        return self._lengths.get(topic, 0)

    def put(self, topic: str, offset: int, pos: int, size: int) -> None:
        """Index topic offset ``offset``; a no-op when it is already there (recovery)."""
        fd = self._open(topic)
        if offset < self._lengths[topic]:
            return
        if offset != self._lengths[topic]:
            raise ValueError(f"topic {topic} offset {offset} after {self._lengths[topic]}")
        os.pwrite(fd, ENTRY.pack(pos, size), offset * ENTRY.size)
        self._lengths[topic] = offset + 1
        self._dirty.add(topic)
        self.counters.bytes_written["cq"] += ENTRY.size

    def entries(self, topic: str, offset: int, count: int) -> list[tuple[int, int]]:
        end = min(self.length(topic), offset + count)
        if offset >= end:
            return []
        raw = os.pread(self._fds[topic], (end - offset) * ENTRY.size, offset * ENTRY.size)
        return [(pos, size) for pos, size in ENTRY.iter_unpack(raw)]

    def first_offset_at(self, topic: str, min_pos: int, start: int) -> int:
        """The first offset >= ``start`` whose record is at or after ``min_pos`` (bisection)."""
        lo, hi = start, self.length(topic)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.entries(topic, mid, 1)[0][0] < min_pos:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def fsync(self) -> None:
        for topic in self._dirty:
            os.fsync(self._fds[topic])
            self.counters.fsyncs["cq"] += 1
        self._dirty.clear()

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
