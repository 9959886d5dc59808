"""The message log: the CommitLog's role, and the store's write-ahead log.

Every mutating call of the store appends exactly one frame (see ``layout``): timer
bodies, delete messages, deliveries (which double as the topic log, as RocketMQ delivers
into the CommitLog of the real topic), dead letters. The frame is the ack point; the
TimerLog units and wheel slots that point into it are derived and can be rebuilt.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

from storage.wheel.counters import WheelCounters
from storage.wheel.layout import (
    FRAME_HEAD,
    Record,
    decode_frame_records,
    decode_record,
    encode_frame,
    encode_record,
)
from storage.wheel.segments import SegmentedFile


class MessageLog:
    def __init__(
        self, directory: str, segment_bytes: int, counters: WheelCounters, sync: bool
    ) -> None:
        self.file = SegmentedFile(directory, segment_bytes, "msglog", counters)
        self.counters = counters
        self.sync = sync

    @property
    def end(self) -> int:
        return self.file.end

    def append(self, records: list[Record]) -> list[tuple[int, int]]:
        """Append one frame; return each record's (position, size). Durable per policy."""
        frame, where = encode_frame([encode_record(r) for r in records])
        pos = self.file.append(frame)
        if self.sync:
            self.file.fsync()
        return [(pos + at, size) for at, size in where]

    def read(self, pos: int, size: int) -> Record:
        self.counters.body_reads += 1
        return decode_record(self.file.read(pos, size))

    def replay(self, from_pos: int) -> Iterator[tuple[int, int, Record]]:
        """(position, size, record) of every intact frame at or after ``from_pos``.

        Stops at the first frame whose length or checksum is wrong and truncates the
        log there: that frame was torn by a crash and was never acknowledged.
        """
        for segment in list(self.file.segments_from(from_pos)):
            start = max(0, from_pos - segment.base)
            data = self.file.read_segment(segment, start)
            at = 0
            while at < len(data):
                ok = len(data) - at >= FRAME_HEAD.size
                if ok:
                    length, crc = FRAME_HEAD.unpack_from(data, at)
                    payload = data[at + FRAME_HEAD.size : at + FRAME_HEAD.size + length]
                    ok = len(payload) == length and zlib.crc32(payload) == crc
                if not ok:
                    self.file.truncate(segment.base + start + at)
                    return
                frame_pos = segment.base + start + at
                for offset, body in decode_frame_records(payload):
                    yield frame_pos + offset, len(body), decode_record(body)
                at += FRAME_HEAD.size + length

    def close(self) -> None:
        self.file.close()
