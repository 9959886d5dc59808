"""``timerstore bench`` as a user runs it: bad selections and the console summary."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.cli import INDICATIVE, verdict_lines
from bench.sizes import FULL as FULL_SIZES
from bench.targets import judge

ROOT = Path(__file__).resolve().parents[2]
CONSOLE_SCRIPT = Path(sys.executable).with_name("timerstore")


def bench(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CONSOLE_SCRIPT), "bench", "--tiny", "--quiet", "--out", str(tmp_path), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--scenario", "nope"], "unknown scenarios: nope (valid: enqueue (1), burst (2)"),
        (["--scenario", "burst,9,nope"], "unknown scenarios: nope (valid:"),
        (["--stores", "rocks,nope"], "unknown systems: nope (valid: rocks, rocks-sync, wheel"),
        (["--scenario", "disk"], "selects no scenario to run"),
        (["--scenario", "8"], "selects no scenario to run"),
        (["--growth-payloads", "300"], "--growth-payloads 300: expected some of 200,4096"),
        (["--growth-payloads", "x"], "--growth-payloads x: expected some of 200,4096"),
    ],
)
def test_a_bad_selection_is_a_usage_error(tmp_path: Path, args: list[str], says: str) -> None:
    done = bench(tmp_path, *args)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    error = done.stderr.strip().splitlines()[-1]
    assert error.startswith("timerstore bench: error: ") and says in error
    assert not list(tmp_path.iterdir())  # nothing was run


def test_reduced_sizes_say_their_verdicts_are_indicative(tmp_path: Path) -> None:
    done = bench(tmp_path, "--scenario", "steady", "--stores", "rocks")
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("  ")]
    measured = [line for line in lines if "not measured" not in line]
    assert len(measured) == 1 and "steady: p99" in measured[0]
    assert measured[0].endswith(INDICATIVE)
    assert all(INDICATIVE not in line for line in lines if "not measured" in line)
    assert re.search(r"^results: .* \(the run took \d+ min \d+ s\)$", done.stdout, re.M)


def test_full_size_verdicts_carry_no_note() -> None:
    target = {"target": "t", "value": 1, "at_full_size": True}
    for met, word in ((True, "met"), (False, "NOT met")):
        (line,) = verdict_lines([{**target, "met": met}])
        assert line.split()[: len(word.split())] == word.split() and INDICATIVE not in line
        (line,) = verdict_lines([{**target, "met": met, "at_full_size": False}])
        assert line.endswith(INDICATIVE)


def test_an_out_that_cannot_be_a_directory_is_a_usage_error(tmp_path: Path) -> None:
    a_file = tmp_path / "results"
    a_file.write_text("not a directory")
    done = bench(a_file, "--scenario", "burst", "--stores", "heap")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    error = done.stderr.strip().splitlines()[-1]
    assert error.startswith("timerstore bench: error: --out ") and "cannot create" in error


def test_verdicts_and_the_report_give_each_value_its_unit() -> None:
    """The targets table said "3.2" and "12" with no unit: seconds? milliseconds?"""
    from bench.report import targets_table

    targets = judge(_burst_and_growth_results(), FULL_SIZES.to_json())
    by_name = {t["name"]: t for t in targets}
    assert [by_name[n]["unit"] for n in ("burst_all_delivered_4s", "burst_p99_4s")] == ["s", "ms"]
    lines = verdict_lines([by_name["burst_all_delivered_4s"], by_name["burst_p99_4s"]])
    assert lines[0].endswith("of the due instant: 3.21 s"), lines
    assert lines[1].endswith("p99 lateness under 4 s: 3,190 ms"), lines
    table = "\n".join(targets_table(targets))
    for shown in ("| 3.21 s |", "| 3,190 ms |", "| 270 MB |", "| 0.79x |"):
        assert shown in table, table


def _burst_and_growth_results() -> dict[str, Any]:
    burst = {"timers": 1_000_000, "deliver_all_s": 3.21, "never_delivered": 0}
    burst |= {"lateness": {"p99_ms": 3190.0}, "rss_growth_mb": 270.0}
    growth = {"variants": {"p200": {"end_vs_start": 0.79, "pending_end": 20_000_000}}}
    systems = {
        "burst": {"systems": {"rocks": {"status": "ok", "figures": burst}}},
        "growth": {"systems": {"rocks": {"status": "ok", "figures": growth}}},
    }
    return {"scenarios": systems}


def test_tombstone_deliveries_sets_the_scenarios_size(tmp_path: Path) -> None:
    done = bench(
        tmp_path, "--scenario", "tombstones", "--stores", "heap", "--tombstone-deliveries", "3_000"
    )
    assert done.returncode == 0, done.stderr
    (run,) = tmp_path.iterdir()
    results = json.loads((run / "results.json").read_text())
    assert results["meta"]["argv"][-2:] == ["--tombstone-deliveries", "3000"]
    figures = results["scenarios"]["tombstones"]["systems"]["heap"]["figures"]
    assert figures["deliveries"] == 3000 and figures["pending_end"] == 0


def test_growth_at_size_delivers_a_burst_and_a_steady_rate_on_the_grown_store(
    tmp_path: Path,
) -> None:
    """--growth-at-size: the grown 200 B store, reopened on the real clock, delivers the
    burst and the steady rate whole and none early, beside the timers it already holds;
    --growth-payloads and --growth-no-blob leave every other variant out."""
    done = bench(
        tmp_path, "--scenario", "growth", "--stores", "rocks",
        "--growth-payloads", "200", "--growth-no-blob", "--growth-at-size",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (run,) = tmp_path.iterdir()
    results = json.loads((run / "results.json").read_text())
    assert results["meta"]["argv"][-4:] == [
        "--growth-payloads", "200", "--growth-no-blob", "--growth-at-size",
    ]  # fmt: skip
    variants = results["scenarios"]["growth"]["systems"]["rocks"]["figures"]["variants"]
    assert list(variants) == ["p200"]
    grown, at_size = variants["p200"]["pending_end"], variants["p200"]["at_size"]
    assert grown == 2000 and at_size["pending_before"] == grown
    burst, steady = at_size["burst"], at_size["steady"]
    assert burst["delivered"] == burst["timers"] == 500 and burst["never_delivered"] == 0
    assert burst["lateness"]["early"] == 0 and burst["deliver_all_s"] is not None
    assert steady["scheduled"] > 0 and steady["never_delivered"] == 0
    assert steady["lateness"]["early"] == 0
    for phase in (burst, steady):  # what RocksDB did meanwhile: stalls, compaction left
        rocksdb = phase["counters"]["rocksdb"]
        assert rocksdb["write_stall_s"] >= 0 and rocksdb["pending_compaction_bytes"] >= 0
        assert "tickers" not in phase["counters"]  # no statistics: as the empty-store runs
    assert "burst p99 at size" in (run / "report.md").read_text()
