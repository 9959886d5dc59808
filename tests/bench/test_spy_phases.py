"""bench.spy_phases: py-spy's collapsed stacks grouped by phase, and its run on a real store."""

from __future__ import annotations

import pytest

from bench import spy_phases

SCHEDULE = "<module> (p.py:9);RocksTimerStore.schedule (store.py:70);schedule (w.py:34)"
DELIVER = "<module> (p.py:17);Engine.run_once (app/engine/engine.py:92)"
COMMIT = f"{DELIVER};Dispatcher._commit (d.py:221);RocksTimerStore.commit_delivered (s.py:82)"


def test_each_stack_lands_in_the_first_group_that_matches() -> None:
    lines = [
        f"{SCHEDULE};RocksCore.write (storage/rocks/core.py:99) 30\n",
        f"{SCHEDULE};multi_get (storage/rocks/db.py:228) 6\n",
        f"{SCHEDULE};_new_timers_batch (w.py:108) 12\n",
        f"{DELIVER};Scanner.run_once (s.py:66);RocksTimerStore.due (store.py:77) 20\n",
        f"{COMMIT};RocksCore.write (storage/rocks/core.py:99) 4\n",
        f"{COMMIT} 8\n",
        f"{DELIVER};Dispatcher.run_once (d.py:141) 2\n",
        "<module> (p.py:8);make_batches (bench/core_throughput.py:50) 99\n",  # neither phase
        "\n",
    ]
    # 1,000 timers at 100 Hz: one sample is 10 ms, 10 us per timer
    us = spy_phases.group_samples(lines, 1000, 100)
    assert us == {
        ("schedule", "db.write"): 300.0,
        ("schedule", "ids multi-get"): 60.0,
        ("schedule", "keys, records, results, the batch"): 120.0,
        ("deliver", "due scan"): 200.0,
        ("deliver", "commit: db.write"): 40.0,
        ("deliver", "commit: the rest"): 80.0,
        ("deliver", "engine: dispatcher, queue, lateness"): 20.0,
    }
    rows = spy_phases.table([us])
    assert rows[-1].split() == ["deliver", "all", "340.00"]
    assert "schedule  all" in rows[4] and rows[4].split()[-1] == "480.00"


def test_run_schedules_and_delivers_every_timer(capsys: pytest.CaptureFixture[str]) -> None:
    assert spy_phases.main(["run", "3000"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("schedule ") and "deliver " in out
