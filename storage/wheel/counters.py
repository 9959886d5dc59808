"""Counters of the wheel store for the benchmark: I/O by file kind, rolls, chain walks."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class WheelCounters:
    """Process-lifetime counters (not persisted; the benchmark reads them around a run).

    ``bytes_written`` and ``fsyncs`` are keyed by file kind: ``msglog``, ``timerlog``,
    ``wheel`` (32 bytes per slot update; msync counts as an fsync), ``cq`` (per-topic
    consume queues of the topic log) and ``checkpoint``.
    """

    bytes_written: Counter[str] = field(default_factory=Counter)
    fsyncs: Counter[str] = field(default_factory=Counter)
    rolls: int = 0  # timers re-enqueued with a new unit and body copy
    delete_rolls: int = 0  # DELETE units that had to roll too
    units_read: int = 0  # TimerLog units read by dequeues (both passes)
    body_reads: int = 0  # message-log records read by dequeues
    slots_dequeued: int = 0  # non-empty slots walked
    empty_slots: int = 0
    max_units_per_slot: int = 0  # the longest chain one dequeue walked
    deletes_applied: int = 0  # normal units dropped because a DELETE unit named them
    stale_units: int = 0  # units superseded by a reschedule, roll copy or earlier delivery
    past_due: int = 0  # schedules clamped into the slot being read

    def snapshot(self) -> dict[str, object]:
        return {
            "bytes_written": dict(self.bytes_written),
            "fsyncs": dict(self.fsyncs),
            "rolls": self.rolls,
            "delete_rolls": self.delete_rolls,
            "units_read": self.units_read,
            "body_reads": self.body_reads,
            "slots_dequeued": self.slots_dequeued,
            "empty_slots": self.empty_slots,
            "units_read_per_dequeue": self.units_read / max(1, self.slots_dequeued),
            "max_units_per_slot": self.max_units_per_slot,
            "deletes_applied": self.deletes_applied,
            "stale_units": self.stale_units,
            "past_due": self.past_due,
        }
