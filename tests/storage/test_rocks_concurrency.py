"""The RocksDB store under its real threads: counters stay exact on disk.

The counters are persisted as absolute values computed under the store's lock, so a
write that landed out of order, or a count staged outside the lock, would leave the
reopened store's counts wrong. Here
the engine's scanner and dispatcher threads deliver on the real clock while two client
threads schedule and cancel; after a reopen every persisted count must match the data.
"""

from __future__ import annotations

import random
import threading

from app.clock import SystemClock
from app.engine import Engine, EngineSettings
from storage.protocol import CancelOutcome, NewTimer
from storage.rocks import RocksSettings, RocksTimerStore

TOPICS = ("a", "b", "c")
NOW = 1_700_000_000_000


def _client(
    store: RocksTimerStore, worker: int, rounds: int, cancelled: list[int], errors: list
) -> None:
    try:
        _schedule_and_cancel(store, worker, rounds, cancelled)
    except Exception as exc:  # an error in a thread is only printed: the test raises it
        errors.append(exc)


def _schedule_and_cancel(
    store: RocksTimerStore, worker: int, rounds: int, cancelled: list[int]
) -> None:
    rng, clock = random.Random(worker), SystemClock()
    for n in range(rounds):
        now = clock.now_ms()
        batch = [
            NewTimer(rng.choice(TOPICS), f"w{worker}-{n}-{i}", now + rng.choice((0, 1, 5, 60_000)))
            for i in range(50)
        ]
        store.schedule(batch, now)
        victims = [("a", f"w{worker}-{n}-{i}") for i in range(0, 50, 7)]
        outcomes = store.cancel(victims)
        cancelled[worker] += sum(1 for r in outcomes if r.outcome == CancelOutcome.REMOVED)


def test_counters_on_disk_match_the_data_after_concurrent_delivery(tmp_path):
    settings = RocksSettings(str(tmp_path / "r"))
    store = RocksTimerStore(settings)
    engine = Engine(store, SystemClock(), EngineSettings(tick_ms=1, scan_batch=64))
    cancelled = [0, 0]
    errors: list[Exception] = []
    # daemon: a client thread that hangs must not keep the test run from ending
    workers = [
        threading.Thread(target=_client, args=(store, w, 200, cancelled, errors), daemon=True)
        for w in range(2)
    ]
    engine.start()
    try:
        for w in workers:
            w.start()
        for w in workers:
            w.join(120)
        assert not any(w.is_alive() for w in workers), "client threads still ran after 120 s"
        if errors:
            raise errors[0]
    finally:
        engine.stop()  # its threads are stopped whatever failed above
        if not any(w.is_alive() for w in workers):  # never close the store under a writer
            store.close()

    store = RocksTimerStore(settings)  # counts below are read back from disk
    try:
        stats = store.stats()
        logged = {t: len(store.read_log(t, 0, 1_000_000)) for t in TOPICS}
        pending = store.list_pending(limit=100_000)
        assert stats.delivered == sum(logged.values()) > 0
        assert stats.cancelled == sum(cancelled) > 0
        assert (
            stats.pending == len(pending.timers) == 2 * 200 * 50 - stats.delivered - stats.cancelled
        )
        assert {t.topic: t.log_end_offset for t in store.topics()} == logged
        by_topic = {t: sum(1 for p in pending.timers if p.topic == t) for t in TOPICS}
        assert {t.topic: t.pending for t in store.topics() if t.pending} == {
            t: n for t, n in by_topic.items() if n
        }
    finally:
        store.close()
