"""The delivery queue's lifecycle: stop wakes every waiter at once; start opens it again."""

from __future__ import annotations

import threading

from app.engine.delivery_queue import DeliveryQueue
from storage.protocol import DueTimer
from storage.records import TimerRecord


def _batch(n: int) -> list[DueTimer]:
    record = TimerRecord(b"", {}, 0, 0)
    return [DueTimer(b"k%d" % i, "t", str(i), 0, record) for i in range(n)]


def test_stop_wakes_a_blocked_get_and_a_producer_waiting_for_space() -> None:
    queue = DeliveryQueue(2)
    queue.put(_batch(2))
    results: dict[str, object] = {}
    waiting = threading.Barrier(3)

    def wait_for_space() -> None:
        waiting.wait()
        results["space"] = queue.wait_for_space(timeout_s=60)

    def wait_until_empty() -> None:
        waiting.wait()
        results["empty"] = queue.wait_until_empty(timeout_s=60)

    threads = [threading.Thread(target=f) for f in (wait_for_space, wait_until_empty)]
    for t in threads:
        t.start()
    waiting.wait()
    queue.stop()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads)
    assert results == {"space": True, "empty": True}  # woken by the close, not the timeout
    # a closed queue still hands out what it holds (the engine drains it), then never waits
    assert queue.closed and len(queue.get(timeout_s=60) or []) == 2
    assert queue.get(timeout_s=60) is None


def test_start_reopens_a_stopped_queue() -> None:
    queue = DeliveryQueue(1)
    queue.stop()
    queue.start()
    assert not queue.closed
    queue.put(_batch(1))
    assert queue.wait_for_space(timeout_s=0.01) is False  # full, open: it waits and says so
