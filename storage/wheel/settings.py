"""Settings of the RIP-43 wheel store; RocketMQ 5's defaults unless told otherwise."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from storage.errors import ConfigError

DAY_MS = 24 * 3600 * 1000


@dataclass(frozen=True)
class WheelSettings:
    """Where the files live and how the wheel is shaped.

    ``precision_ms`` is the width of one slot (RocketMQ ``timerPrecisionMs``, 1 s);
    ``slots`` is ``timerWheelInSec`` in precision units (7 days); the wheel file holds
    ``2 x slots`` slots, as RocketMQ's. ``roll_window_ms`` is ``timerRollWindowSlots``
    (2 days): a timer further away is written with the ROLL magic at the window edge.

    ``flush_policy``: ``"sync"`` fsyncs the message log before every mutating call
    returns (the RocksDB store's ``sync_writes``); ``"async"`` leaves it to the page
    cache, which survives a killed process but not a power cut. TimerLog, wheel and the
    per-topic queues are flushed at each checkpoint, every ``checkpoint_interval_ms``:
    recovery rebuilds whatever came after it from the message log and the TimerLog.
    """

    path: str = ""  # a directory; the service derives it from data_dir
    precision_ms: int = 1000
    slots: int = 7 * 24 * 3600
    roll_window_ms: int = 2 * DAY_MS
    msglog_segment_bytes: int = 64 << 20
    timerlog_segment_bytes: int = 52 << 20  # RocketMQ's timer log files are 100 MB
    flush_policy: Literal["sync", "async"] = "async"
    checkpoint_interval_ms: int = 1000
    log_retention_ms: int = 7 * DAY_MS
    roll_batch: int = 1000  # roll copies written per message-log frame during a dequeue

    def __post_init__(self) -> None:
        for name in ("precision_ms", "slots", "msglog_segment_bytes", "checkpoint_interval_ms"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1", field=name)
        if self.timerlog_segment_bytes < 52 * 4:
            raise ConfigError(
                "timerlog_segment_bytes must hold at least 4 units", field="timerlog_segment_bytes"
            )
        if not 3 * self.precision_ms <= self.roll_window_ms <= self.slots * self.precision_ms:
            raise ConfigError(
                "roll_window_ms must be between 3 slots and slots x precision_ms "
                "(a unit may never land on a slot the reader has not reached yet)",
                field="roll_window_ms",
            )
        if self.flush_policy not in ("sync", "async"):
            raise ConfigError("flush_policy must be sync or async", field="flush_policy")
