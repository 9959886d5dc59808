"""Stored timer records that do not decode: no single one may stall the store.

Every writer encodes with ``storage.records`` and an ingest checks what it links in, so
a value that does not decode can only come from outside (a file copied in by hand, a
disk that returned garbage). The due scan moves such a timer to the dead letters with
the reason, in the same lock section that found it, and hands out the rest: its stored
bytes are kept, as a binary payload, so nothing is lost. Reads show it as it is stored,
with the reason in ``last_error``, instead of failing.
"""

from __future__ import annotations

import msgspec
import rocksdict as rd

from storage import records
from storage.protocol import TimerState, TimerView
from storage.rocks import keys as layout
from storage.rocks.core import RocksCore
from storage.rocks.db import multi_get

_encode = msgspec.msgpack.Encoder().encode


def reason(exc: Exception) -> str:
    return f"the stored record does not decode ({exc}); its stored bytes are the payload"


def stand_in(key_ms: int, value: bytes) -> records.TimerRecord:
    """What is known of a timer whose record does not decode: its key time, its bytes."""
    return records.TimerRecord(value, {}, 0, key_ms, binary=True)


def decodable(
    keys: list[bytes], values: list[bytes]
) -> tuple[list[bytes], list[bytes], list[tuple[bytes, bytes, str]]]:
    """(keys, values) of the records that decode, and (key, value, reason) of the rest."""
    good_keys: list[bytes] = []
    good_values: list[bytes] = []
    bad: list[tuple[bytes, bytes, str]] = []
    for key, value in zip(keys, values, strict=True):
        try:
            records.decode_record(value)
        except msgspec.DecodeError as exc:  # ValidationError included
            bad.append((key, value, reason(exc)))
            continue
        good_keys.append(key)
        good_values.append(value)
    return good_keys, good_values, bad


def dead_letter_undecodable(
    core: RocksCore, bad: list[tuple[bytes, bytes, str]], now_ms: int
) -> None:
    """Move each (key, stored value, reason) to the dead letters (``core.lock`` held)."""
    h = core.handles
    idents = [key[8:] for key, _, _ in bad]
    current = multi_get(h.cfs["ids"], idents)
    stored = multi_get(h.cfs["deadletter"], idents)
    batch = rd.WriteBatch(raw_mode=True)
    delta = core.delta()
    for (key, value, why), ident, points_at in zip(bad, idents, current, strict=True):
        key_ms = layout.timer_key_ms(key)
        letter = records.DeadLetter(key_ms, stand_in(key_ms, value), now_ms, why)
        batch.delete(key, h.handles["timers"])
        if points_at == key[:8]:  # its ids entry, not a newer schedule's
            batch.delete(ident, h.handles["ids"])
        batch.put(ident, _encode(letter), h.handles["deadletter"])
        delta.pending[layout.split_ident(ident)[0]] -= 1
    delta.totals["dead_lettered"] += stored.count(None)
    core.write(batch, delta)


def view(key: bytes, value: bytes, exc: Exception, in_flight: set[bytes]) -> TimerView:
    """A pending timer whose record does not decode, as a read shows it."""
    key_ms, topic, timer_id = layout.decode_timer_key(key)
    state = TimerState.IN_FLIGHT if key in in_flight else TimerState.PENDING
    r = stand_in(key_ms, value)
    return TimerView(
        topic, timer_id, state, key_ms, key_ms, 0, 0, r.payload, r.headers, r.binary,
        last_error=reason(exc),
    )  # fmt: skip
