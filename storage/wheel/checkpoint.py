"""The checkpoint: read time, flushed positions, and the small state that is not a log.

RocketMQ's ``timercheck`` file holds the read time and the TimerLog/CommitLog offsets
already reflected in the wheel. Here it also carries what a restart cannot cheaply
recompute from the logs: totals, the per-segment reference times used by retention, and
the dead letters (a short list; they are kept in memory, not in the hot files).

It is written to a temporary file, fsynced and renamed over the old one, so a crash
leaves either the old or the new checkpoint, never a mix.
"""

from __future__ import annotations

import os

import msgspec

from storage.wheel.control import write_atomically
from storage.wheel.counters import WheelCounters
from storage.wheel.layout import DeadRec

FILE = "checkpoint"


class Checkpoint(msgspec.Struct, frozen=True):
    read_ms: int  # every slot before it is done (-1: the store has never seen a clock)
    replay_pos: int  # message-log position where the oldest open slot began its dequeue
    msglog_pos: int  # message-log end: every record before it has its unit in the TimerLog
    timerlog_pos: int  # TimerLog end: every unit before it is reflected in the wheel file
    next_seq: int
    write_ms: int
    totals: dict[str, int]
    log_start: dict[str, int]
    msglog_meta: dict[int, tuple[int, int]]  # segment base -> (max unit time, max delivered)
    timerlog_meta: dict[int, int]  # segment base -> max unit time
    dead_letters: list[DeadRec]


EMPTY = Checkpoint(-1, 0, 0, 0, 1, 0, {}, {}, {}, {}, [])
_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(Checkpoint).decode


def load(directory: str) -> Checkpoint:
    try:
        with open(os.path.join(directory, FILE), "rb") as f:
            return _decode(f.read())
    except FileNotFoundError:
        return EMPTY


def save(directory: str, checkpoint: Checkpoint, counters: WheelCounters) -> None:
    data = _encode(checkpoint)
    write_atomically(directory, FILE, data)
    counters.bytes_written["checkpoint"] += len(data)
    counters.fsyncs["checkpoint"] += 2
