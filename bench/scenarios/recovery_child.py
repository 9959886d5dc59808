"""The process the recovery scenario kills: schedules timers and delivers until SIGKILL.

``python -m bench.scenarios.recovery_child SYSTEM WORKDIR N BATCH``. Prints ``A <count>``
after each acknowledged schedule call (the parent trusts nothing beyond the last one),
then ``DONE``, then keeps delivering on the real clock until it is killed.
"""

from __future__ import annotations

import sys
import time

from bench.measure import now_ms
from bench.scenarios.common import timers
from bench.systems import all_specs

HOT_SPREAD_MS = 1000
HOT_MAX = 50_000  # the last tenth due within HOT_SPREAD_MS, capped: 1% of a full run's 5M
COLD_DELAY_MS = 3_600_000


def main(argv: list[str]) -> int:
    name, workdir, n, batch = argv[0], argv[1], int(argv[2]), int(argv[3])
    spec = next(s for s in all_specs() if s.name == name)
    system = spec.open(workdir, simulated=False)
    system.start()
    import random

    rng = random.Random(7)
    hot = min(n // 10, HOT_MAX)
    acked = 0
    while acked < n:
        count = min(batch, n - acked)
        t = now_ms()

        def due(i: int, t: int = t) -> int:
            return t + (rng.randrange(HOT_SPREAD_MS) if i >= n - hot else COLD_DELAY_MS)

        system.schedule(timers("r", acked, count, due, 100, rng), t)
        acked += count
        print(f"A {acked}", flush=True)
    print("DONE", flush=True)
    while True:
        time.sleep(1)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
