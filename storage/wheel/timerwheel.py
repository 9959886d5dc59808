"""The TimerWheel (a memory-mapped slot array) and the TimerLog (fixed 52-byte units).

Slot index = time / precision mod (2 x slots), RocketMQ's ``getSlotIndex``. The wheel is
reused revolution after revolution, so a slot only belongs to the asked time when its
stored time matches: otherwise it is empty (RocketMQ ``getSlot`` returns -1 then).

A slot never written is 32 zero bytes, which would match time 0 (a clock in the first
precision after the epoch) with a chain at TimerLog position 0. No written slot is all
zero (a chain ending at position 0 is one unit, so its count is 1 or -1), so an all-zero
slot is empty: existing wheel files read as before.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator

from storage.errors import StoreOpenError
from storage.wheel.counters import WheelCounters
from storage.wheel.layout import (
    BLANK_HEAD,
    EMPTY_SLOT,
    MAGIC_BLANK,
    SLOT,
    SLOT_SIZE,
    UNIT,
    UNIT_SIZE,
    Slot,
    Unit,
    valid_unit,
)
from storage.wheel.segments import SegmentedFile

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
ZERO_SLOT = Slot(0, 0, 0, 0, 0)  # never written (see the module docstring)


class TimerWheel:
    def __init__(self, path: str, slots: int, precision_ms: int, counters: WheelCounters) -> None:
        self.slots_total = slots * 2
        self.precision_ms = precision_ms
        self.counters = counters
        size = self.slots_total * SLOT_SIZE
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if os.fstat(self._fd).st_size != size:
            if os.fstat(self._fd).st_size:  # shape.check tells this first, with both values
                os.close(self._fd)
                raise StoreOpenError(f"{path} was made for another number of slots than {slots}")
            os.ftruncate(self._fd, size)  # sparse; an all-zero slot reads as empty
        self._mm = mmap.mmap(self._fd, size)

    def slot_ms(self, time_ms: int) -> int:
        """The start of the slot holding ``time_ms``."""
        return time_ms // self.precision_ms * self.precision_ms

    def index(self, time_ms: int) -> int:
        return time_ms // self.precision_ms % self.slots_total

    def get_slot(self, time_ms: int) -> Slot:
        slot = self.raw_slot(self.index(time_ms))
        if slot.time_ms != time_ms // self.precision_ms or slot == ZERO_SLOT:
            return EMPTY_SLOT
        return slot._replace(time_ms=slot.time_ms * self.precision_ms)

    def raw_slot(self, index: int) -> Slot:
        """The stored slot at ``index`` with its time in precision units (testable)."""
        return Slot(*SLOT.unpack_from(self._mm, index * SLOT_SIZE))

    def put_slot(self, time_ms: int, first_pos: int, last_pos: int, num: int, magic: int) -> None:
        at = self.index(time_ms) * SLOT_SIZE
        SLOT.pack_into(self._mm, at, time_ms // self.precision_ms, first_pos, last_pos, num, magic)
        self.counters.bytes_written["wheel"] += SLOT_SIZE

    def live_slots(self, from_ms: int) -> Iterator[Slot]:
        """Every slot of the revolution starting at ``from_ms`` that holds units, in time order."""
        first = from_ms // self.precision_ms
        last = first + self.slots_total
        start = self.index(from_ms)
        for n in range(self.slots_total):
            i = (start + n) % self.slots_total
            raw = SLOT.unpack_from(self._mm, i * SLOT_SIZE)
            time_units, first_pos, last_pos, num, magic = raw
            if first <= time_units < last and last_pos >= 0 and raw != ZERO_SLOT:
                yield Slot(time_units * self.precision_ms, first_pos, last_pos, num, magic)

    def flush(self) -> None:
        self._mm.flush()
        self.counters.fsyncs["wheel"] += 1

    def close(self) -> None:
        self._mm.close()
        os.close(self._fd)


def _blank(size: int) -> bytes:
    """A BLANK unit filling a segment's tail (zeros when even its header does not fit)."""
    if size < BLANK_HEAD.size:
        return bytes(size)
    return BLANK_HEAD.pack(size, 0, MAGIC_BLANK) + bytes(size - BLANK_HEAD.size)


class TimerLog:
    """Append-only units chained backwards per slot through ``prev_pos``."""

    def __init__(self, directory: str, segment_bytes: int, counters: WheelCounters) -> None:
        self.counters = counters
        self.file = SegmentedFile(directory, segment_bytes, "timerlog", counters, pad=_blank)

    def append(
        self,
        prev_pos: int,
        magic: int,
        write_time_ms: int,
        target_ms: int,
        body_offset: int,
        body_size: int,
        topic_hash: int,
        seq: int,
    ) -> int:
        delay = target_ms - write_time_ms
        if not INT32_MIN <= delay <= INT32_MAX:  # only after a very long outage
            write_time_ms, delay = target_ms, 0
        data = UNIT.pack(
            UNIT_SIZE,
            prev_pos,
            magic,
            write_time_ms,
            delay,
            body_offset,
            body_size,
            topic_hash,
            seq,
        )
        return self.file.append(data)

    def read(self, pos: int) -> Unit:
        self.counters.units_read += 1
        return Unit(*UNIT.unpack(self.file.read(pos, UNIT_SIZE)))

    def replay(self, from_pos: int) -> Iterator[tuple[int, Unit]]:
        """Valid units at or after ``from_pos``; truncates the file at the first torn one.

        A segment ends at a BLANK unit or, in any but the last segment, at a tail too
        short for a unit; anything else that is not a valid unit is a torn write.
        """
        segments = list(self.file.segments_from(from_pos))
        for segment in segments:
            start = max(0, from_pos - segment.base)
            data = self.file.read_segment(segment, start)
            last = segment is self.file.segments[-1]
            at = 0
            while at < len(data):
                left = len(data) - at
                if left >= BLANK_HEAD.size and BLANK_HEAD.unpack_from(data, at)[2] == MAGIC_BLANK:
                    break
                if left < UNIT_SIZE and not last:
                    break
                unit = Unit(*UNIT.unpack_from(data, at)) if left >= UNIT_SIZE else None
                if unit is None or not valid_unit(unit):
                    self.file.truncate(segment.base + start + at)
                    return
                yield segment.base + start + at, unit
                at += UNIT_SIZE
