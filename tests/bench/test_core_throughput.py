"""bench.core_throughput at a tiny size: the issue's JSON keys, and ratios that follow from
the runs it records (the ratio of medians, and each repeat's own ratio for ``*_paired``)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from bench import core_throughput


def test_the_result_file_holds_the_issues_keys_and_ratios_of_its_own_runs(tmp_path: Path):
    assert core_throughput.main(["--timers", "3000", "--repeats", "3", "--stores",
                                 "rocks,heap", "--out", str(tmp_path)]) == 0  # fmt: skip
    (path,) = tmp_path.glob("core-throughput-*.json")
    stores = json.loads(path.read_text())["stores"]
    for name in ("rocks", "heap"):
        figures = stores[name]
        runs = {key: figures[f"{key}_per_s"]["runs"] for key in ("raw_puts", "schedule", "deliver")}
        assert all(len(r) == 3 and min(r) > 0 for r in runs.values())
        for key, values in runs.items():
            assert figures[f"{key}_per_s"]["median"] == statistics.median(values)
        ratios = figures["ratios"]
        for key in ("schedule", "deliver"):
            medians = statistics.median(runs[key]) / statistics.median(runs["raw_puts"])
            assert ratios[f"{key}_vs_raw"] == medians
            paired = statistics.median(
                a / b for a, b in zip(runs[key], runs["raw_puts"], strict=True)
            )
            assert ratios[f"{key}_vs_raw_paired"] == paired
