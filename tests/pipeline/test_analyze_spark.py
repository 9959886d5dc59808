"""Delivery export and the analytics job on a real local Spark session."""

from __future__ import annotations

import json
import random

import numpy as np
import pyarrow.parquet as pq
import pytest

from app.clock import FakeClock
from app.engine import Engine
from pipeline.analyze import analyze
from pipeline.deliveries import write_deliveries
from storage.protocol import NewTimer
from storage.rocks import RocksSettings, RocksTimerStore
from timerstore.cli import main

pytestmark = pytest.mark.spark

T0 = 1_700_000_040_000  # a minute boundary


def known_set(rng: random.Random) -> tuple[list[tuple], dict[str, list[int]], dict[int, list[int]]]:
    rows, by_topic, by_minute = [], {"a": [], "b": [], "c": []}, {}
    for i in range(3000):
        topic = "abc"[i % 3]
        requested = T0 + rng.randrange(180_000)
        lateness = {"a": rng.randrange(100), "b": 5, "c": int(rng.expovariate(1 / 40))}[topic]
        created = requested - 10_000
        if i % 50 == 0:  # past due when created: lateness counts from creation
            created = requested + 2_000
        delivered = max(requested, created) + lateness
        rows.append(
            (topic, f"i{i}", requested, max(requested, created), delivered, 1, "rocks", created)
        )
        by_topic[topic].append(lateness)
        by_minute.setdefault(delivered - delivered % 60_000, []).append(lateness)
    return rows, by_topic, by_minute


def pct(values: list[int]) -> tuple[float, float, float, int]:
    p50, p90, p99 = np.percentile(values, [50, 90, 99])
    return float(p50), float(p90), float(p99), max(values)


def test_lateness_percentiles_match_numpy_per_topic_and_minute(spark, tmp_path):
    rows, by_topic, by_minute = known_set(random.Random(3))
    write_deliveries(str(tmp_path / "deliveries"), rows)
    a = analyze(spark, str(tmp_path / "deliveries"), str(tmp_path / "report"))
    assert a.overall.deliveries == 3000 and a.overall.early == 0
    everything = [v for values in by_topic.values() for v in values]
    assert (
        a.overall.p50_ms,
        a.overall.p90_ms,
        a.overall.p99_ms,
        a.overall.max_ms,
    ) == pytest.approx(pct(everything))
    assert [r.key for r in a.by_topic] == ["a", "b", "c"]
    for r in a.by_topic:
        assert (r.p50_ms, r.p90_ms, r.p99_ms, r.max_ms) == pytest.approx(pct(by_topic[r.key]))
        assert r.deliveries == len(by_topic[r.key])
    assert [int(r.key) for r in a.by_minute] == sorted(by_minute)
    for r in a.by_minute:
        assert (r.p50_ms, r.p90_ms, r.p99_ms, r.max_ms) == pytest.approx(pct(by_minute[int(r.key)]))
    assert a.by_topic[1].p99_ms == 5.0  # topic b is exactly 5 ms late every time
    assert a.peak_per_s >= a.mean_per_s > 0
    report = tmp_path / "report"
    for name in a.files:
        assert (report / name).exists(), name
    for png in ("lateness_by_minute.png", "lateness_by_topic.png", "deliveries_per_second.png"):
        assert (report / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = (report / "report.md").read_text()
    assert "early deliveries: none" in text and "| b | 1000 | 0 | 5.0 | 5.0 | 5.0 | 5 |" in text
    by_topic_table = pq.read_table(report / "by_topic.parquet").to_pylist()
    assert {r["topic"]: r["deliveries"] for r in by_topic_table} == {
        "a": 1000,
        "b": 1000,
        "c": 1000,
    }


def test_an_early_delivery_is_counted_and_fails_the_command(spark, tmp_path, capsys):
    rows = [
        ("t", "ok", T0, T0, T0 + 3, 1, "rocks", T0 - 100),
        ("t", "early", T0 + 1000, T0 + 1000, T0 + 999, 1, "rocks", None),
    ]
    write_deliveries(str(tmp_path / "d"), rows)
    code = main(["analyze", str(tmp_path / "d"), "--out", str(tmp_path / "r")])
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and out["overall"]["early"] == 1
    assert "1 EARLY DELIVERIES" in (tmp_path / "r" / "report.md").read_text()


def test_export_deliveries_from_a_store_then_analyze(spark, tmp_path, capsys):
    data_dir = tmp_path / "data"
    store = RocksTimerStore(RocksSettings(str(data_dir / "rocks")))
    clock = FakeClock(T0)
    engine = Engine(store, clock)
    store.schedule([NewTimer("orders", f"o{i}", T0 + 100 * i) for i in range(20)], T0)
    store.schedule([NewTimer("mail", "late", T0 - 5_000)], T0)  # past due when created
    for _ in range(12):
        engine.run_once(clock.advance(250))  # delivered up to 250 ms late
    store.close()

    assert (
        main(["export-deliveries", "--data-dir", str(data_dir), "--out", str(tmp_path / "x")]) == 0
    )
    assert json.loads(capsys.readouterr().out)["deliveries"] == 21
    table = pq.read_table(tmp_path / "x").to_pylist()
    late = next(r for r in table if r["id"] == "late")
    assert (late["deliver_at_ms"], late["created_at_ms"], late["store"]) == (
        T0 - 5_000,
        T0,
        "rocks",
    )
    assert late["key_ms"] == T0 - 5_000 and late["delivered_at_ms"] == T0 + 250
    for r in table:
        assert r["deliver_at_ms"] <= r["delivered_at_ms"] <= r["deliver_at_ms"] + 250 or r is late
        assert r["attempts"] == 1

    since = T0 + 1_000
    assert main(["export-deliveries", "--data-dir", str(data_dir), "--out", str(tmp_path / "y"),
                 "--since-ms", str(since)]) == 0  # fmt: skip
    capsys.readouterr()
    # the engine ran at T0+250, T0+500, ...: o8 (due T0+800) is the first delivered at T0+1000
    expected = {f"o{i}" for i in range(8, 20)}
    assert {r["id"] for r in table if r["delivered_at_ms"] >= since} == expected
    exported = [r["id"] for r in pq.read_table(tmp_path / "y").to_pylist()]
    assert sorted(exported) == sorted(expected), exported  # exactly those, each once

    assert main(["analyze", str(tmp_path / "x"), "--out", str(tmp_path / "report")]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["overall"]["deliveries"] == 21 and result["overall"]["early"] == 0
    assert result["overall"]["max_ms"] == 250  # not 5,250: the past-due one counts from creation
    assert {r["key"] for r in result["by_topic"]} == {"orders", "mail"}


def test_export_from_a_missing_store_is_one_line_and_exit_3(tmp_path, capsys):
    code = main(["export-deliveries", "--data-dir", str(tmp_path / "none"), "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 3 and len(err) == 1, err
    assert err[0].startswith("timerstore export-deliveries: no RocksDB store at ")
    assert str(tmp_path / "none") in err[0]
