"""bench.cluster_batch at a tiny size: the single node and the cluster of three get the
same bodies, every acknowledged timer is pending afterwards on each, and the ratio is
computed from the two rates of the same run."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from bench.cluster_batch import measure

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def test_both_sides_hold_every_acknowledged_timer(tmp_path: Path) -> None:
    args = argparse.Namespace(batches=6, per_batch=50, concurrency=3, log_mirror="on")
    result = measure(tmp_path, args)
    assert result["timers"] == 300
    assert result["single"]["pending"] == 300
    assert result["cluster"]["pending"] == 300
    single, cluster = result["single"]["timers_per_s"], result["cluster"]["timers_per_s"]
    assert result["ratio"] == pytest.approx(cluster / single)
    assert single == pytest.approx(300 / result["single"]["seconds"])
