"""Walking one slot's chain: deletes first, then the normal units, newest first.

RocketMQ's ``dequeue`` reads a slot's whole chain into two in-memory stacks, hands the
delete requests over, waits, then the normal ones. A slot can hold a million units, so
this walk keeps only the deletes in memory: pass 1 walks the chain collecting the
sequences the DELETE units name, pass 2 walks it again handing out normal units a batch
at a time (``units_read`` counts both passes; the price of bounded memory).

Units appended to a slot while it is being walked (a past-due schedule clamped into the
slot being read, a roll copy that lands there) are taken in by ``extend``: the new part
of the chain, from the slot's new ``last_pos`` down to the old top, is walked the same
way. Chains only ever point backwards, so positions at or below ``floor`` were seen.
"""

from __future__ import annotations

from storage.wheel.layout import Unit
from storage.wheel.timerwheel import TimerLog, TimerWheel


class SlotWalk:
    def __init__(self, slot_ms: int) -> None:
        self.slot_ms = slot_ms
        self.top = -1  # highest position taken in so far
        self.floor = -1  # positions at or below it belong to an earlier segment of the walk
        self.cursor = -1  # next position pass 2 reads
        self.deletes: set[int] = set()
        self.units = 0

    def extend(self, timer_log: TimerLog, wheel: TimerWheel) -> bool:
        """Pass 1 over units appended since the last look; False when there are none."""
        last_pos = wheel.get_slot(self.slot_ms).last_pos
        if last_pos <= self.top:
            return False
        pos = last_pos
        while pos > self.top:
            unit = timer_log.read(pos)
            self.units += 1
            if unit.is_delete and not unit.is_roll:
                self.deletes.add(unit.seq)
            if unit.prev_pos >= pos:
                raise ValueError(f"TimerLog chain at {pos} points forwards: damaged files")
            pos = unit.prev_pos
        self.floor, self.cursor, self.top = self.top, last_pos, last_pos
        return True

    def next(self, timer_log: TimerLog, wheel: TimerWheel) -> tuple[int, Unit] | None:
        """Pass 2: the next unit of the chain, or None when the slot is done."""
        while True:
            if self.cursor > self.floor:
                pos = self.cursor
                unit = timer_log.read(pos)
                self.units += 1
                self.cursor = unit.prev_pos
                return pos, unit
            if not self.extend(timer_log, wheel):
                return None
