"""bench.webhook_sink on tiny sizes: it runs end to end and reports every figure."""

from __future__ import annotations

import json
import socket

from bench import webhook_receiver, webhook_sink


def test_webhook_bench_reports_rate_and_lateness(tmp_path):
    out = tmp_path / "webhook.json"
    webhook_sink.main(
        ["--timers", "60", "--per-topic", "30", "--spread-ms", "300", "--json", str(out)]
    )
    report = json.loads(out.read_text())
    # the receiver alone, measured in the same run: the sink's rate means nothing above it
    alone = report["receiver_alone"]
    assert alone["requests"] >= 60 and alone["requests_per_s"] > 0
    healthy = report["healthy"]
    assert healthy["timers"] == 60 and healthy["deliveries_per_s"] > 0
    assert healthy["cpu_us_per_delivery"] > 0
    # keep-alive: the sink reused its connections (at most one per request in flight)
    assert 1 <= healthy["receiver_connections"] <= 16
    for name in ("isolation_without_dead_route", "isolation_with_dead_route"):
        # the healthy webhook's lateness as its receiver saw it, and at the store's commit
        for figures_of in ("log-ok", "hook-ok", "hook-ok_at_receiver"):
            figures = report[name][figures_of]
            assert 0 <= figures["p50_ms"] <= figures["p99_ms"] <= figures["max_ms"]
        assert report[name]["deliveries_per_s"] == 200  # 2 topics x 30 timers in 0.3 s
    assert report["isolation_with_dead_route"]["dead_route"] is True


def test_the_bench_receiver_keeps_connections_alive_in_a_process_of_its_own():
    """Two requests on one connection, both answered; it ran outside this process (its
    GIL is not the sink's) and counted the one connection and both latenesses."""
    body = json.dumps({"topic": "k", "deliver_at_ms": 0}).encode()
    request = b"POST /hook HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    with webhook_receiver.ReceiverProcess() as receiver:
        port = int(receiver.url.rsplit(":", 1)[1].split("/")[0])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
            answers = b""
            for sent in (1, 2):
                conn.sendall(request)
                while answers.count(b"\r\n\r\n") < sent:
                    chunk = conn.recv(4096)
                    assert chunk, f"closed after {answers!r}"
                    answers += chunk
        report = receiver.report()
    assert answers.count(b"HTTP/1.1 204") == 2
    assert report["connections"] == 1 and len(report["late_ms"]["k"]) == 2
