"""The RocksDB store's key layout (format 3): the one implementation every writer uses.

Column families and their keys (``|`` is concatenation, not a byte)::

    timers:    +----------------+--------+------+-------+
               | u64be deliver  | topic  | 0x00 |  id   |  -> TimerRecord (msgpack array)
               | ms (8 bytes)   | 1..128 |      | 1..128|
               +----------------+--------+------+-------+
    ids:       | topic | 0x00 | id |                      -> u64be key time (pending, 8 bytes;
                                                            also delivered, when the timer
                                                            key is gone from timers and
                                                            lies in a range below)
                                                            or b"D" + DeliveredRecord
    topiclog:  | topic | 0x00 | u64be first offset |      -> LogPage (msgpack array): the
                                                            messages of one commit, offsets
                                                            first.., read by seek_for_prev
    deadletter:| topic | 0x00 | id |                      -> DeadLetter (msgpack array)
    journal:   | u64be delivered ms | u64be sequence |     -> list[bytes]: the idents
                                                            (topic | 0x00 | id) of one
                                                            commit; each resolves in ids to
                                                            its delivered record, and both
                                                            expire together; or b"P" +
                                                            DeliveredPage (a clean range)
    ranges:    | first timer key of a delivered range |   -> journal key (16 bytes) | last
                                                            timer key: read by seek_for_prev
    meta:      | ascii name |                             -> small values (counters,
                                                            format_version = 3)
    control:   owned by storage.rocks.control (routes, consumer groups)

A batch whose due scan saw a clean key range (only its own keys, see ``RocksCore``) and
that starts above every earlier such range is committed by one page: its journal page
holds the delivered facts in columns, ``ranges`` maps the range to that page, and
``ids`` is not written at all (format 3; the commit's per-timer ``ids`` put was half
its cost, docs/perf.md). The ranges are disjoint and ascending, so one ``seek_for_prev``
finds the only page that can hold a timer key. Any other batch (after a release rewound
the cursor, or an ingest below it) writes a delivered record per timer, as format 2 did.

Big-endian time first makes byte order equal (deliver_ms, topic, id) order, so "every
timer due by now" is one forward scan bounded above by ``u64be(now + 1)``. Topic and id
are restricted by ``storage.names`` to ``[A-Za-z0-9._:-]`` (1..128 bytes), so 0x00
never occurs inside them and can separate them: ``(topic, id)`` order is preserved
because 0x00 sorts before every allowed byte.
"""

from __future__ import annotations

import struct

from storage.errors import InvalidInputError
from storage.names import PAIR_SEPARATOR

SEPARATOR = PAIR_SEPARATOR.encode()  # b"\x00"
_U64 = struct.Struct(">Q")
U64_MAX = (1 << 64) - 1
# The bound of every time (epoch ms) and log offset the store takes: keys pack them as
# u64, and the scan adds 1 to a time (``u64(now + 1)``), so half the range leaves room.
MAX_TIME_MS = (1 << 63) - 1
MAX_OFFSET = (1 << 63) - 1
DELIVERED_TAG = b"D"  # ids values: 8 bytes = pending key time; DELIVERED_TAG + record


def u64(value: int) -> bytes:
    return _U64.pack(value)


unpack_u64 = _U64.unpack_from  # (raw, at=0) -> (value,): for loops that cannot pay a call


def read_u64(raw: bytes, at: int = 0) -> int:
    return int(_U64.unpack_from(raw, at)[0])


def check_range(value: int, field: str, high: int = MAX_TIME_MS) -> int:
    """``value`` when it is in ``[0, high]``; else InvalidInputError naming ``field``.

    The store's entry points check what they pack into keys: the API bounds these already,
    but the pipeline and the benchmarks call the store directly.
    """
    if not 0 <= value <= high:
        raise InvalidInputError(f"{field} must be between 0 and {high}", field=field)
    return value


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


JOURNAL_KEY_BYTES = 16


def range_value(journal: bytes, last_key: bytes) -> bytes:
    """``ranges`` value: the page's journal key, then the range's last timer key."""
    return journal + last_key


def split_range_value(value: bytes) -> tuple[bytes, bytes]:
    return value[:JOURNAL_KEY_BYTES], value[JOURNAL_KEY_BYTES:]
