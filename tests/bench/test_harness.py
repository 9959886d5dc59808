"""The benchmark harness on tiny sizes, so it cannot rot: structure, not timings."""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path
from typing import Any

import pytest

from bench import cli, scenarios
from bench.sizes import FULL as FULL_SIZES
from bench.systems import PEER_FAMILIES, all_specs, select_specs
from bench.targets import judge

RESULT_STATUSES = {"ok", "skipped", "unavailable"}
# the in-process systems; the peers' servers are exercised by test_peers.py
IN_PROCESS = "rocks,rocks-sync,wheel,heap,aps"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bench")
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers())  # as the console script does, without the others
    args = parser.parse_args(
        ["bench", "--tiny", "--quiet", "--stores", IN_PROCESS, "--out", str(out)]
    )
    assert args.handler(args) == 0
    (stamp,) = out.iterdir()
    return stamp


@pytest.fixture(scope="module")
def results(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "results.json").read_text())
    return data


def test_results_describe_the_run(results: dict[str, Any]) -> None:
    meta = results["meta"]
    for key in ("started_utc", "finished_utc", "mode", "sizes", "machine", "versions", "systems"):
        assert key in meta
    assert meta["mode"] == "tiny"
    assert meta["versions"]["rocksdict"]
    chosen = {s.name for s in select_specs(IN_PROCESS.split(","))}
    assert {s["name"] for s in meta["systems"]} == chosen
    assert chosen == {s.name for s in all_specs() if s.family not in PEER_FAMILIES}


def test_every_scenario_ran_on_every_system_without_errors(results: dict[str, Any]) -> None:
    assert set(results["scenarios"]) == {m.KEY for m in scenarios.SCENARIOS}
    for key, entry in results["scenarios"].items():
        for name, result in entry["systems"].items():
            assert result["status"] in RESULT_STATUSES, (key, name, result.get("traceback"))
            if result["status"] == "ok":
                assert result["figures"], (key, name)
                assert result["disk"]["bytes_on_disk"] >= 0
            else:
                assert result["reason"]


def test_every_available_system_produced_figures(results: dict[str, Any]) -> None:
    for spec in results["meta"]["systems"]:
        statuses = [e["systems"][spec["name"]]["status"] for e in results["scenarios"].values()]
        if spec["available"]:
            assert "ok" in statuses, spec["name"]
        else:
            assert set(statuses) == {"unavailable"}, spec["name"]


def test_rocks_runs_every_scenario_and_its_figures_are_sound(results: dict[str, Any]) -> None:
    rocks = {k: e["systems"]["rocks"] for k, e in results["scenarios"].items()}
    assert {r["status"] for r in rocks.values()} == {"ok"}
    assert rocks["burst"]["figures"]["never_delivered"] == 0
    assert rocks["steady"]["figures"]["lateness"]["early"] == 0
    cancel = rocks["cancel"]["figures"]
    assert cancel["cancelled_but_delivered"] == 0 and cancel["kept_but_not_delivered"] == 0
    assert rocks["recovery"]["figures"]["lost"] == 0
    assert rocks["recovery"]["figures"]["delivered_twice"] == 0
    recovery = rocks["recovery"]["figures"]
    assert recovery["first_delivery_s"] >= recovery["ready_s"] > 0  # reopened, then delivered
    assert rocks["long_delays"]["figures"]["delivered"] == rocks["long_delays"]["figures"]["timers"]
    variants = rocks["growth"]["figures"]["variants"]
    assert set(variants) == {"p200", "p4096", "p200_blob", "p4096_blob"}
    for variant in variants.values():  # the figures docs/bench.md reads compaction by
        tickers = variant["counters"]["tickers"]
        assert tickers["rocksdb.number.keys.written"] > 0  # statistics were on
        assert {"rocksdb.compaction.total.time.cpu_micros", "rocksdb.stall.micros"} <= set(tickers)
    phases = rocks["tombstones"]["figures"]["phases"]
    assert set(phases) == set(scenarios.tombstones.PHASES)


def test_every_system_delivered_what_it_should(results: dict[str, Any]) -> None:
    """Counts, not timings: a system that silently delivers nothing must not pass as fast."""
    for key in ("long_delays", "tombstones", "cancel", "burst"):
        for name, result in results["scenarios"][key]["systems"].items():
            if result["status"] != "ok":
                continue
            f = result["figures"]
            if key == "long_delays":
                assert f["delivered"] == f["timers"], (key, name)
                assert f["lateness"]["early"] == 0, (key, name)
            elif key == "tombstones":
                # the scenario always records what is left pending: missing is a failure
                pending_end = f.get("pending_end", "missing")
                assert pending_end == 0, (key, name, pending_end)
            elif key == "cancel":
                assert f["cancelled_but_delivered"] == 0, (key, name)
                if not name.startswith("aps-") or name.endswith("nograce"):
                    assert f["kept_but_not_delivered"] == 0, (key, name)
            elif name.endswith("nograce") or not name.startswith("aps-"):
                assert f["never_delivered"] == 0, (key, name)


def test_targets_are_judged(results: dict[str, Any]) -> None:
    names = {t["name"] for t in results["targets"]}
    assert {"burst_all_delivered_4s", "steady_p99_20ms", "recovery_lost_0"} <= names
    burst = results["scenarios"]["burst"]["systems"]["rocks"]["figures"]
    (target,) = [t for t in results["targets"] if t["name"] == "burst_all_delivered_4s"]
    assert target["value"] == burst["deliver_all_s"]
    assert target["met"] is (burst["deliver_all_s"] <= 4 and burst["never_delivered"] == 0)


def test_a_target_flips_when_its_figure_crosses_the_line(results: dict[str, Any]) -> None:
    """The verdict follows the figure: the same run with a slower burst is judged not met."""
    changed = copy.deepcopy(results)
    burst = changed["scenarios"]["burst"]["systems"]["rocks"]["figures"]
    burst["schedule_overran_ms"] = 0  # an overrun is not a burst: not judged at all
    verdicts = {}
    for all_s, missing in ((3.0, 0), (4.5, 0), (3.0, 1)):
        burst["deliver_all_s"], burst["never_delivered"] = all_s, missing
        judged = {t["name"]: t["met"] for t in judge(changed, FULL_SIZES.to_json())}
        verdicts[(all_s, missing)] = judged["burst_all_delivered_4s"]
    assert verdicts == {(3.0, 0): True, (4.5, 0): False, (3.0, 1): False}


def test_tiny_sizes_are_never_the_issues_sizes(results: dict[str, Any]) -> None:
    for t in results["targets"]:
        assert t["at_full_size"] is False


def test_rip43_claims_each_get_a_verdict(results: dict[str, Any]) -> None:
    claims = results["claims"]
    assert [c["claim"][:2] for c in claims] == ["1.", "2.", "3.", "4."]
    for c in claims:
        assert c["verdict"].split(":")[0] in ("confirmed", "refuted", "depends", "not tested")
        assert c["numbers"]
    compaction = " ".join(claims[1]["numbers"])
    assert "compaction wrote" in compaction and "CPU-s" in compaction
    assert "writes stalled" in compaction


def test_report_has_every_section_and_chart(run_dir: Path) -> None:
    report = (run_dir / "report.md").read_text()
    assert "## Targets (RocksDB store)" in report
    assert "## RIP-43 claims against RocksDB" in report
    for module in scenarios.SCENARIOS:
        assert f"## {module.NUMBER}. {module.TITLE}" in report
    assert "## 8. Disk" in report
    charts = list(run_dir.glob("*.png"))
    assert charts
    for chart in charts:
        assert chart.name in report
        assert chart.read_bytes().startswith(b"\x89PNG")
    assert not (run_dir / "data").exists()  # the stores' data is removed


def test_selection_by_family_and_unknown_names() -> None:
    assert {s.name for s in select_specs(["wheel"])} == {"wheel-1000ms", "wheel-10ms"}
    assert [m.KEY for m in scenarios.select(["2", "cancel"])] == ["burst", "cancel"]
    with pytest.raises(ValueError):
        select_specs(["nope"])
    with pytest.raises(ValueError):
        scenarios.select(["nope"])


def test_targets_without_figures_are_not_measured() -> None:
    from bench.sizes import FULL

    empty: dict[str, Any] = {"scenarios": {}}
    assert {t["met"] for t in judge(empty, FULL.to_json())} == {None}
