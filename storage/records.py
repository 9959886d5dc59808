"""The records the stores keep (msgpack ``array_like`` structs) and their codecs.

Shared by the RocksDB store, the wheel store and the pipeline; where they live in RocksDB
is ``storage.rocks.keys``. Encoding them as arrays pins the field order: a field may be
added only at the end, with a default.
"""

from __future__ import annotations

import msgspec


class TimerRecord(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """The value of ``timers[key]``: everything needed to deliver the timer.

    ``gc=False``: the hot path makes one per timer and holds no cycles through it (its
    fields are bytes, str, int and a dict of str); untracked, the cyclic collector's
    passes dropped from 1.7 to 0.1 us per delivered timer (docs/perf.md).
    """

    payload: bytes
    headers: dict[str, str]
    created_at_ms: int
    requested_deliver_at_ms: int
    attempts: int = 0
    binary: bool = False  # the payload came as payload_b64 and is returned that way
    # When this attempt fell due, for lateness: a retry's back-off time or a replay's
    # time. 0 (a first attempt, deferred or not): the later of requested and created.
    # Written by retries and replays only; a schedule writes the six fields above.
    due_again_at_ms: int = 0


class DeliveredRecord(msgspec.Struct, array_like=True, frozen=True):
    """``ids[topic,id]`` after delivery (behind DELIVERED_TAG), kept for the retention window.

    A commit that is not one clean range above every earlier one (format 2's commit)
    writes it over the pending value (the u64 key time) in the same WriteBatch that
    deletes the timer. A clean range committed by one page (format 3,
    ``storage.rocks.keys``) writes no ``ids`` entry: the value keeps the key time, the
    timer key is gone, and the page's columns hold these facts (``DeliveredPage``); a
    key time at or below the highest such range is told apart from a pending one by a
    lookup of the timer key.
    """

    delivered_at_ms: int
    offset: int  # topic-log offset, -1 when another sink took it
    key_ms: int
    requested_deliver_at_ms: int
    created_at_ms: int
    attempts: int
    sink: str


class LogMessage(msgspec.Struct, array_like=True, frozen=True):
    """The value of ``topiclog[topic,offset]``: one delivered message."""

    id: str
    payload: bytes
    headers: dict[str, str]
    binary: bool
    requested_deliver_at_ms: int
    key_ms: int
    delivered_ms: int
    attempts: int


class LogEntry(msgspec.Struct, array_like=True, frozen=True):
    """One message of a topic-log page; ``record`` is the timer's stored bytes, copied raw."""

    id: str
    key_ms: int
    attempts: int  # delivery attempts including this one
    record: TimerRecord


class RawLogEntry(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """A ``LogEntry`` as the commit writes it: the timer's stored bytes, not re-encoded.

    Same array as ``LogEntry`` (a test pins that); readers decode with ``LogEntry``.
    """

    id: str
    key_ms: int
    attempts: int
    record: msgspec.Raw


class LogPage(msgspec.Struct, array_like=True, frozen=True):
    """The value of ``topiclog[topic, first offset]``: one commit's messages of one topic."""

    delivered_ms: int
    entries: list[LogEntry]


class LazyLogPage(msgspec.Struct, array_like=True, frozen=True):
    """A ``LogPage`` read with its entries left as they are stored (``msgspec.Raw``, views
    into the page's bytes): a reader decodes only the entries it returns, so a page of
    large payloads is not decoded whole for a page of a few of them."""

    delivered_ms: int
    entries: list[msgspec.Raw]


class RawLogPage(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """A ``LogPage`` as the commit writes it (entries carry raw record bytes)."""

    delivered_ms: int
    entries: list[RawLogEntry]


class DeadLetter(msgspec.Struct, array_like=True, frozen=True):
    key_ms: int
    record: TimerRecord
    failed_ms: int
    last_error: str


class DeliveredPage(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """A journal page (behind PAGE_TAG) of one batch delivered over a clean key range.

    Format 3: such a batch writes nothing per timer in ``ids`` (its pending key time
    stays there); the page holds what a delivered record would, in columns, one encode
    per batch, and ``ranges`` leads from a timer key to the page. ``keys`` are the timer
    keys in order (key time | ident), so a reader finds one by bisection.
    """

    sink: str
    keys: list[bytes]
    offsets: list[int]  # topic-log offsets, -1 each when another sink took the batch
    attempts: list[int]
    requested_deliver_at_ms: list[int]
    created_at_ms: list[int]

    def delivered(self, index: int, delivered_ms: int) -> DeliveredRecord:
        key = self.keys[index]
        return DeliveredRecord(
            delivered_ms, self.offsets[index], int.from_bytes(key[:8], "big"),
            self.requested_deliver_at_ms[index], self.created_at_ms[index],
            self.attempts[index], self.sink,
        )  # fmt: skip


class JournalEntry(msgspec.Struct, array_like=True, frozen=True):
    """One delivery, for the delivery history export (analytics).

    Not stored as such by the RocksDB store: its journal pages list idents, and an entry
    is the ident joined with its delivered record (``journal_entry``).
    """

    topic: str
    id: str
    requested_deliver_at_ms: int
    key_ms: int
    delivered_ms: int
    attempts: int
    offset: int
    created_at_ms: int


encode = msgspec.msgpack.Encoder().encode


def encode_new_timer(
    payload: bytes, headers: dict[str, str], created_at_ms: int, requested_ms: int, binary: bool
) -> bytes:
    """A new timer's ``TimerRecord`` as every writer of one encodes it: its first six
    fields (``due_again_at_ms`` is written by retries and replays only). The RocksDB
    schedule builds the same tuple inline, in its hot loop; a test compares the bytes."""
    return encode((payload, headers, created_at_ms, requested_ms, 0, binary))


_record_decoder = msgspec.msgpack.Decoder(TimerRecord)
_delivered_decoder = msgspec.msgpack.Decoder(DeliveredRecord)
_log_decoder = msgspec.msgpack.Decoder(LogMessage)
_page_decoder = msgspec.msgpack.Decoder(LogPage)
_lazy_page_decoder = msgspec.msgpack.Decoder(LazyLogPage)
_log_entry_decoder = msgspec.msgpack.Decoder(LogEntry)
_dead_decoder = msgspec.msgpack.Decoder(DeadLetter)
_journal_page_decoder = msgspec.msgpack.Decoder(list[bytes])
_records_decoder = msgspec.msgpack.Decoder(list[TimerRecord])

decode_record = _record_decoder.decode
decode_delivered = _delivered_decoder.decode
decode_log_message = _log_decoder.decode
decode_log_page = _page_decoder.decode
decode_log_page_lazily = _lazy_page_decoder.decode
decode_log_entry = _log_entry_decoder.decode
decode_dead_letter = _dead_decoder.decode
_delivered_page_decoder = msgspec.msgpack.Decoder(DeliveredPage)
PAGE_TAG = b"P"  # a journal value starting so is a DeliveredPage, else a list of idents


def decode_records(stored: list[bytes]) -> list[TimerRecord]:
    """Many stored ``TimerRecord`` values decoded in one call: laid end to end behind one
    msgpack array header (``array 32``) they are an array of records, so msgspec's loop
    replaces one Python call per record (the due scan's, docs/perf.md)."""
    if not stored:
        return []
    return _records_decoder.decode(b"".join((b"\xdd", len(stored).to_bytes(4, "big"), *stored)))


def decode_journal_page(raw: bytes) -> list[bytes] | DeliveredPage:
    """One journal page: the idents of a commit that wrote delivered records in ``ids``
    (format 2's only kind), or a ``DeliveredPage`` (format 3's clean ranges)."""
    if raw[:1] == PAGE_TAG:
        return _delivered_page_decoder.decode(memoryview(raw)[1:])
    return _journal_page_decoder.decode(raw)


def journal_entry(topic: str, timer_id: str, done: DeliveredRecord) -> JournalEntry:
    return JournalEntry(
        topic, timer_id, done.requested_deliver_at_ms, done.key_ms, done.delivered_at_ms,
        done.attempts, done.offset, done.created_at_ms,
    )  # fmt: skip
