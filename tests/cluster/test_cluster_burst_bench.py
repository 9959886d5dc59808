"""bench.cluster_burst at a tiny size: the single node and the cluster of three get the
same burst, each delivers every acknowledged timer exactly once into its topic logs (and
the cluster's log mirror, on as by default, holds each once), and the ratio is computed
from the two delivery times of the same run."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from bench.cluster_burst import measure

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def test_both_sides_deliver_the_burst_exactly_once(tmp_path: Path) -> None:
    args = argparse.Namespace(timers=650, per_batch=100, concurrency=3, log_mirror="on")
    result = measure(tmp_path, args)
    assert result["timers"] == 600  # whole bodies only
    for side in ("single", "cluster"):
        figures = result[side]
        assert figures["log_entries"] == 600, (side, figures)
        assert figures["ids_repeated"] == 0, (side, figures)
        assert figures["pending_after"] == 0, (side, figures)
        assert figures["schedule_seconds"] < figures["lead_seconds"], (side, figures)
    assert result["exactly_once"]
    assert result["cluster"]["mirror_messages"] == 600  # the mirror copied each once
    assert "mirror_messages" not in result["single"]
    single, cluster = result["single"]["delivered_seconds"], result["cluster"]["delivered_seconds"]
    assert result["ratio"] == pytest.approx(cluster / single)
    assert result["target_met"] == (result["ratio"] <= 2.0)
