"""The in-memory heap (``heapq``): no durability, the upper bound of what Python can do."""

from __future__ import annotations

import heapq
import threading
from collections.abc import Sequence
from typing import Any

from bench.measure import lateness_summary, now_ms
from bench.systems.base import BenchSystem, BenchTimer, Delivery

Entry = tuple[int, int, str, int]  # (deliver_at_ms, sequence, id, scheduled_ms)


class HeapSystem(BenchSystem):
    sim_clock = True
    batch_native = True

    def __init__(self, name: str, workdir: str, *, record_ids: bool = False, tick_ms: int = 10):
        super().__init__(name, workdir)
        self.tick_ms = tick_ms
        self._heap: list[Entry] = []
        self._payloads: dict[str, bytes] = {}  # id -> payload of the live timers
        self._seq = 0
        self._cond = threading.Condition()
        self._delivery = Delivery(record_ids=record_ids)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _schedule(self, timers: Sequence[BenchTimer], now_ms_: int) -> None:
        with self._cond:
            for t in timers:
                self._seq += 1
                heapq.heappush(self._heap, (t.deliver_at_ms, self._seq, t.id, now_ms_))
                self._payloads[t.id] = t.payload
            self._cond.notify()

    def cancel(self, ids: Sequence[str]) -> int:
        with self._cond:  # lazy deletion: the entry stays in the heap, the payload goes
            return sum(1 for i in ids if self._payloads.pop(i, None) is not None)

    def run_due(self, now_ms_: int) -> int:
        with self._cond:
            return self._pop_due(now_ms_, now_ms_)

    def _pop_due(self, due_ms: int, delivered_ms: int) -> int:
        d = self._delivery
        n = 0
        while self._heap and self._heap[0][0] <= due_ms:
            deliver_ms, _seq, tid, scheduled_ms = heapq.heappop(self._heap)
            if self._payloads.pop(tid, None) is None:
                continue  # cancelled
            d.add(tid, delivered_ms - max(deliver_ms, scheduled_ms))
            n += 1
        return n

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="bench-heap", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            with self._cond:
                t = now_ms()
                self._pop_due(t, t)
                wait_ms = self.tick_ms if not self._heap else self._heap[0][0] - t
                self._cond.wait(min(max(wait_ms, 1), self.tick_ms) / 1000)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def delivered(self) -> int:
        return self._delivery.count

    def lateness(self) -> dict[str, Any]:
        return lateness_summary(self._delivery.lateness_ms, self._delivery.early)

    def delivered_ids(self) -> set[str]:
        return self._delivery.ids

    def pending(self) -> int:
        return len(self._payloads)

    def close(self) -> None:
        self.stop()
