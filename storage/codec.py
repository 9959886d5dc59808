"""Key and value codec of the RocksDB store: the one implementation every writer uses.

Column families and their keys (``|`` is concatenation, not a byte)::

    timers:    +----------------+--------+------+-------+
               | u64be deliver  | topic  | 0x00 |  id   |  -> TimerRecord (msgpack array)
               | ms (8 bytes)   | 1..128 |      | 1..128|
               +----------------+--------+------+-------+
    ids:       | topic | 0x00 | id |                      -> u64be key time (pending, 8 bytes)
                                                            or b"D" + DeliveredRecord
    topiclog:  | topic | 0x00 | u64be first offset |      -> LogPage (msgpack array): the
                                                            messages of one commit, offsets
                                                            first.., read by seek_for_prev
    deadletter:| topic | 0x00 | id |                      -> DeadLetter (msgpack array)
    journal:   | u64be delivered ms | u64be sequence |     -> list[JournalEntry]
    meta:      | ascii name |                             -> small values (counters,
                                                            format_version = 2)
    control:   owned by storage.rocks.control (routes, consumer groups)

Big-endian time first makes byte order equal (deliver_ms, topic, id) order, so "every
timer due by now" is one forward scan bounded above by ``u64be(now + 1)``. Topic and id
are restricted to ``[A-Za-z0-9._:-]`` (1..128 bytes), so 0x00 never occurs inside them
and can separate them: ``(topic, id)`` order is preserved because 0x00 sorts before
every allowed byte.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable

import msgspec

from storage.errors import InvalidInputError

NAME_MAX_BYTES = 128
SEPARATOR = b"\x00"
_U64 = struct.Struct(">Q")
U64_MAX = (1 << 64) - 1


class TimerRecord(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """The value of ``timers[key]``: everything needed to deliver the timer.

    ``gc=False``: the hot path makes one per timer and holds no cycles through it (its
    fields are bytes, str, int and a dict of str); untracked, the cyclic collector's
    passes dropped from 1.7 to 0.1 us per delivered timer (docs/perf.md).
    """

    payload: bytes
    headers: dict[str, str]
    created_ms: int
    requested_deliver_ms: int
    attempts: int = 0
    binary: bool = False  # the payload came as payload_b64 and is returned that way


class DeliveredRecord(msgspec.Struct, array_like=True, frozen=True):
    """``ids[topic,id]`` after delivery (behind DELIVERED_TAG), kept for the retention window.

    It overwrites the pending value (the u64 key time) in the same WriteBatch that deletes
    the timer, so one family and one multi-get answer pending, delivered or unknown.
    """

    delivered_at_ms: int
    offset: int  # topic-log offset, -1 when another sink took it
    key_ms: int
    requested_deliver_at_ms: int
    created_at_ms: int
    attempts: int
    sink: str


DELIVERED_TAG = b"D"  # ids values: 8 bytes = pending key time; DELIVERED_TAG + record


class LogMessage(msgspec.Struct, array_like=True, frozen=True):
    """The value of ``topiclog[topic,offset]``: one delivered message."""

    id: str
    payload: bytes
    headers: dict[str, str]
    binary: bool
    requested_deliver_ms: int
    key_ms: int
    delivered_ms: int
    attempts: int


class LogEntry(msgspec.Struct, array_like=True, frozen=True):
    """One message of a topic-log page; ``record`` is the timer's stored bytes, copied raw."""

    id: str
    key_ms: int
    attempts: int  # delivery attempts including this one
    record: TimerRecord


class LogPage(msgspec.Struct, array_like=True, frozen=True):
    """The value of ``topiclog[topic, first offset]``: one commit's messages of one topic."""

    delivered_ms: int
    entries: list[LogEntry]


class DeadLetter(msgspec.Struct, array_like=True, frozen=True):
    key_ms: int
    record: TimerRecord
    failed_ms: int
    last_error: str


class JournalEntry(msgspec.Struct, array_like=True, frozen=True):
    """One delivery, for the delivery history export (analytics)."""

    topic: str
    id: str
    requested_deliver_ms: int
    key_ms: int
    delivered_ms: int
    attempts: int
    offset: int
    created_ms: int


_valid_name = re.compile(r"[A-Za-z0-9._:\-]{1,128}").fullmatch


def validate_name(field: str, value: str) -> bytes:
    """Return ``value`` as ASCII bytes, or raise naming ``field`` and the rule it broke."""
    if type(value) is str and _valid_name(value):  # the hot path: one C call
        return value.encode()
    if not isinstance(value, str):
        raise InvalidInputError(f"{field} must be a string", field=field)
    raw = value.encode("utf-8", "surrogatepass")
    if not 1 <= len(raw) <= NAME_MAX_BYTES:
        raise InvalidInputError(
            f"{field} must be 1 to {NAME_MAX_BYTES} bytes, got {len(raw)}", field=field
        )
    raise InvalidInputError(
        f"{field} may contain only A-Z a-z 0-9 . _ : - (got {value!r})", field=field
    )


def validate_idents(pairs: Iterable[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    """Validate many (topic, id) pairs; topics repeat, so each is checked once per call."""
    topics: dict[str, bytes] = {}
    out = []
    for topic, timer_id in pairs:
        topic_b = topics.get(topic)
        if topic_b is None:
            topic_b = topics[topic] = validate_name("topic", topic)
        out.append((topic_b, validate_name("id", timer_id)))
    return out


def u64(value: int) -> bytes:
    return _U64.pack(value)


def read_u64(raw: bytes, at: int = 0) -> int:
    return int(_U64.unpack_from(raw, at)[0])


def ident_key(topic: bytes, timer_id: bytes) -> bytes:
    """``topic | 0x00 | id``: the key of ids, done and deadletter."""
    return topic + SEPARATOR + timer_id


def split_ident(ident: bytes) -> tuple[str, str]:
    topic, _, timer_id = ident.partition(SEPARATOR)
    return topic.decode(), timer_id.decode()


def timer_key(deliver_ms: int, topic: bytes, timer_id: bytes) -> bytes:
    """``u64be(deliver_ms) | topic | 0x00 | id``: the key of the timers family."""
    return _U64.pack(deliver_ms) + topic + SEPARATOR + timer_id


def timer_key_ms(key: bytes) -> int:
    return int(_U64.unpack_from(key, 0)[0])


def decode_timer_key(key: bytes) -> tuple[int, str, str]:
    topic, timer_id = split_ident(key[8:])
    return timer_key_ms(key), topic, timer_id


def log_key(topic: bytes, offset: int) -> bytes:
    return topic + SEPARATOR + _U64.pack(offset)


def log_key_offset(key: bytes) -> int:
    return int(_U64.unpack_from(key, len(key) - 8)[0])


def journal_key(delivered_ms: int, sequence: int) -> bytes:
    return _U64.pack(delivered_ms) + _U64.pack(sequence)


encode = msgspec.msgpack.Encoder().encode
_record_decoder = msgspec.msgpack.Decoder(TimerRecord)
_delivered_decoder = msgspec.msgpack.Decoder(DeliveredRecord)
_log_decoder = msgspec.msgpack.Decoder(LogMessage)
_page_decoder = msgspec.msgpack.Decoder(LogPage)
_dead_decoder = msgspec.msgpack.Decoder(DeadLetter)
_journal_decoder = msgspec.msgpack.Decoder(list[JournalEntry])

decode_record = _record_decoder.decode
decode_delivered = _delivered_decoder.decode
decode_log_message = _log_decoder.decode
decode_log_page = _page_decoder.decode
decode_dead_letter = _dead_decoder.decode
decode_journal = _journal_decoder.decode
