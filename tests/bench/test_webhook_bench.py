"""bench.webhook_sink on tiny sizes: it runs end to end and reports every figure."""

from __future__ import annotations

import json

from bench import webhook_sink


def test_webhook_bench_reports_rate_and_lateness(tmp_path):
    out = tmp_path / "webhook.json"
    webhook_sink.main(
        ["--timers", "60", "--per-topic", "30", "--spread-ms", "300", "--json", str(out)]
    )
    report = json.loads(out.read_text())
    assert report["healthy"]["timers"] == 60 and report["healthy"]["deliveries_per_s"] > 0
    for name in ("isolation_without_dead_route", "isolation_with_dead_route"):
        for topic in ("log-ok", "hook-ok"):
            figures = report[name][topic]
            assert 0 <= figures["p50_ms"] <= figures["p99_ms"] <= figures["max_ms"]
    assert report["isolation_with_dead_route"]["dead_route"] is True
