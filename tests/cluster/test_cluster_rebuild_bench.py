"""bench.cluster_rebuild at a tiny size: node n2 comes back on its old data dir, on an
empty one (replay) and on an empty one after its partitions took snapshots, and every
timer is pending after each round."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from bench.cluster_rebuild import measure, timers_in
from cluster.settings import DEFAULT_PARTITIONS


def test_timers_in_counts_every_timer_once_over_all_partitions() -> None:
    assert timers_in(set(range(DEFAULT_PARTITIONS)), 1_001) == 1_001
    halves = set(range(0, DEFAULT_PARTITIONS, 2)), set(range(1, DEFAULT_PARTITIONS, 2))
    assert sum(timers_in(half, 1_001) for half in halves) == 1_001
    assert timers_in(set(), 1_001) == 0


@pytest.mark.cluster
@pytest.mark.slow
def test_every_timer_survives_each_rebuild(tmp_path: Path) -> None:
    args = argparse.Namespace(timers=2_000, per_batch=200, concurrency=3, log_mirror="on")
    result = measure(tmp_path, args)
    assert result["timers"] == 2_000
    assert result["victim_partitions"]
    assert result["timers_in_victim_partitions"] == timers_in(
        set(result["victim_partitions"]), 2_000
    )
    assert set(result["rounds"]) == {"kept", "replay", "snapshot"}
    for name, figures in result["rounds"].items():
        assert figures["pending_after"] == result["pending_before"], (name, figures)
        assert figures["partitions"] == result["victim_partitions"], (name, figures)
        assert figures["seconds"] == pytest.approx(
            figures["owned_seconds"] + figures["restore_seconds"]
        ), name
    assert result["pending_before"] == 2_000
    assert result["all_pending_after"]
    assert result["rounds"]["replay"]["from_snapshot"] == 0
    assert result["rounds"]["snapshot"]["from_snapshot"] >= len(result["victim_partitions"])
