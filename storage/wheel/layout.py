"""On-disk layouts of the wheel store: TimerLog units, wheel slots, message-log records.

TimerLog unit, 52 bytes, big-endian as Java's ByteBuffer (RocketMQ ``TimerLog.UNIT_SIZE``)::

    size(4) prev_pos(8) magic(4) write_time_ms(8) delay(4) body_offset(8) body_size(4)
    topic_hash(4) reserved(8)

``delay`` is the unit's slot time minus ``write_time_ms``; ``body_offset/size`` locate the
message-log record. ``reserved`` is 0 in RocketMQ; here it carries the timer's
*incarnation sequence* (the same across roll copies, new on every schedule or retry), so
a DELETE unit names its target without a body read and the dequeue can drop stale units.

Wheel slot, 32 bytes (RocketMQ ``Slot.SIZE``)::

    time(8, in precision units) first_pos(8) last_pos(8) num(4) magic(4)

Message-log frame: ``u32 length | u32 crc32 | records``, each record ``u32 size | msgpack``.
A frame is the atomic unit of the store (one call = one frame): recovery drops a torn
tail frame whole, so a reschedule (delete + new schedule) can never be half-applied.
"""

from __future__ import annotations

import struct
import zlib
from typing import NamedTuple

import msgspec

from storage.records import DeadLetter, LogMessage, TimerRecord

UNIT = struct.Struct(">iqiqiqiIq")
UNIT_SIZE = UNIT.size  # 52
SLOT = struct.Struct(">qqqii")
SLOT_SIZE = SLOT.size  # 32
BLANK_HEAD = struct.Struct(">iqi")  # size, 0, BLANK: pads a TimerLog segment's tail

# RocketMQ TimerMessageStore magics.
MAGIC_DEFAULT = 1
MAGIC_ROLL = 1 << 1
MAGIC_DELETE = 1 << 2
MAGIC_BLANK = -1_145_324_613  # 0xBBBBBBBB as a signed int: the filler at a segment's end

FRAME_HEAD = struct.Struct(">II")
RECORD_HEAD = struct.Struct(">I")


class Unit(NamedTuple):
    size: int
    prev_pos: int
    magic: int
    write_time_ms: int
    delay: int
    body_offset: int
    body_size: int
    topic_hash: int
    seq: int  # the reserved field

    @property
    def target_ms(self) -> int:
        return self.write_time_ms + self.delay

    @property
    def is_delete(self) -> bool:
        return bool(self.magic & MAGIC_DELETE)

    @property
    def is_roll(self) -> bool:
        return bool(self.magic & MAGIC_ROLL)


class Slot(NamedTuple):
    time_ms: int  # -1 when empty
    first_pos: int
    last_pos: int
    num: int
    magic: int


EMPTY_SLOT = Slot(-1, -1, -1, 0, 0)


def topic_hash(topic: str) -> int:
    """RocketMQ stores ``realTopic.hashCode()`` for metrics; crc32 serves the same purpose."""
    return zlib.crc32(topic.encode())


def valid_unit(unit: Unit) -> bool:
    return unit.size == UNIT_SIZE and bool(unit.magic & MAGIC_DEFAULT) and unit.magic > 0


# --------------------------------------------------------------------- message-log records
class SchedRec(msgspec.Struct, array_like=True, frozen=True, tag=1):
    """A timer body: a schedule, a roll copy (same seq) or a retry (``replaces`` the old seq)."""

    seq: int
    topic: str
    id: str
    key_ms: int
    record: TimerRecord
    replaces: int = -1


class CancelRec(msgspec.Struct, array_like=True, frozen=True, tag=2):
    """The body of a DELETE unit (RocketMQ's delete message with ``TIMER_DEL_UNIQKEY``)."""

    target_seq: int
    topic: str
    id: str
    key_ms: int
    cancel: bool = False  # True for a client's cancel, False for the old half of a reschedule


SINK_TOTAL_PREFIX = "sink:"  # core.totals["sink:<name>"] counts deliveries per sink


class DeliveredRec(msgspec.Struct, array_like=True, frozen=True, tag=3):
    """A delivery: finishes ``seq``; with a message it is the topic-log entry ``offset``."""

    seq: int
    topic: str
    id: str
    offset: int
    message: LogMessage | None
    sink: str = "log"  # the sink that took it (records before sinks had names: the log)


class DeadRec(msgspec.Struct, array_like=True, frozen=True, tag=4):
    seq: int
    topic: str
    id: str
    letter: DeadLetter


class DeadRemovedRec(msgspec.Struct, array_like=True, frozen=True, tag=5):
    topic: str
    id: str
    cancel: bool = False  # True when a client's cancel removed it (counted as cancelled)


Record = SchedRec | CancelRec | DeliveredRec | DeadRec | DeadRemovedRec

encode_record = msgspec.msgpack.Encoder().encode
decode_record = msgspec.msgpack.Decoder(Record).decode


def encode_frame(records: list[bytes]) -> tuple[bytes, list[tuple[int, int]]]:
    """The frame bytes and, per record, its (offset within the frame, size)."""
    parts: list[bytes] = []
    where: list[tuple[int, int]] = []
    at = FRAME_HEAD.size
    for body in records:
        parts.append(RECORD_HEAD.pack(len(body)))
        parts.append(body)
        where.append((at + RECORD_HEAD.size, len(body)))
        at += RECORD_HEAD.size + len(body)
    payload = b"".join(parts)
    return FRAME_HEAD.pack(len(payload), zlib.crc32(payload)) + payload, where


def decode_frame_records(payload: bytes) -> list[tuple[int, bytes]]:
    """(offset within the frame, record bytes) of each record of a verified payload."""
    out = []
    at = 0
    while at < len(payload):
        (size,) = RECORD_HEAD.unpack_from(payload, at)
        start = at + RECORD_HEAD.size
        out.append((FRAME_HEAD.size + start, payload[start : start + size]))
        at = start + size
    return out
