"""Child process of the crash test: schedules, cancels and delivers until it is killed.

It prints one line per acknowledged call, after the call returned (and so after the
WriteBatch was written to the WAL): ``S id,id,...`` for schedules and ``C id`` for
cancels that answered removed; ``X id,...`` announces a cancel before it is made, since
a cancel may take effect before the parent reads its acknowledgement. The parent kills
it with SIGKILL at a random moment.
"""

from __future__ import annotations

import random
import sys

from app.clock import SystemClock
from app.engine import Engine, EngineSettings
from storage.protocol import CancelOutcome, NewTimer
from storage.rocks import RocksSettings, RocksTimerStore


def main(path: str) -> None:
    store = RocksTimerStore(RocksSettings(path))
    clock = SystemClock()
    engine = Engine(store, clock, EngineSettings(tick_ms=2, scan_batch=50))
    engine.start()
    rng = random.Random()
    future: list[str] = []
    for n in range(1_000_000):
        now = clock.now_ms()
        batch = [
            NewTimer("crash", f"b{n}-{i}", now + rng.choice([-5000, 0, 5, 50, 60_000]))
            for i in range(50)
        ]
        store.schedule(batch, now)
        print("S " + ",".join(t.id for t in batch), flush=True)
        future += [t.id for t in batch if t.deliver_at_ms > now + 10_000]
        if n % 3 == 2 and future:
            victims = [future.pop(rng.randrange(len(future))) for _ in range(min(10, len(future)))]
            print("X " + ",".join(victims), flush=True)  # intent: may land unacknowledged
            results = store.cancel([("crash", v) for v in victims])
            for victim, result in zip(victims, results, strict=True):
                if result.outcome == CancelOutcome.REMOVED:
                    print(f"C {victim}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
