"""The soak's model catches each broken promise, and a short soak of the real server keeps
every one (a real ``timerstore serve``, webhook receiver and clients on loopback)."""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import time
from pathlib import Path

import pytest

from bench.soak import SoakOptions, counters_agree, memory_gauges, parse_args, soak
from bench.soak_load import _signed, start_receiver
from bench.soak_model import Delivery, Model

LOG, HOOK = "log-topic", "hook-topic"


def _model() -> Model:
    return Model(frozenset({HOOK}))


def _on_time(at_ms: int) -> Delivery:
    return Delivery(at_ms, at_ms + 5, at_ms + 7)


def test_a_clean_run_breaks_nothing() -> None:
    model = _model()
    model.scheduled((LOG, "a"), 1000)
    model.scheduled((HOOK, "b"), 2000)
    model.logged_message((LOG, "a"), _on_time(1000))
    model.hooked_message((HOOK, "b"), _on_time(2000))
    result = model.check()
    assert result["violations"] == {}
    assert (result["expected_deliveries"], result["log_deliveries"]) == (2, 1)
    assert model.outstanding() == 0


@pytest.mark.parametrize(
    ("events", "broken"),
    [
        (lambda m: None, "acknowledged, never delivered"),
        (
            lambda m: [m.logged_message((LOG, "a"), Delivery(1000, 1005, 1007, n)) for n in (3, 4)],
            "delivered twice into the log",
        ),
        (lambda m: m.logged_message((LOG, "a"), Delivery(1000, 999, 1001)), "delivered early"),
        (lambda m: m.logged_message((LOG, "a"), Delivery(1000, 1000, 998)), "delivered early"),
        (
            lambda m: (
                m.rescheduled((LOG, "a"), 3000),
                m.logged_message((LOG, "a"), _on_time(1000)),
            ),
            "delivered at a time not the last acknowledged",
        ),
        (
            lambda m: (
                m.cancelled((LOG, "a"), "cancelled"),
                m.logged_message((LOG, "a"), _on_time(1000)),
            ),
            "cancelled, then delivered",
        ),
        (
            lambda m: (
                m.logged_message((LOG, "a"), _on_time(1000)),
                m.logged_message((LOG, "zz"), _on_time(5)),
            ),
            "delivered but never acknowledged",
        ),
        (
            lambda m: (
                m.cancelled((LOG, "a"), "unknown"),
                m.logged_message((LOG, "a"), _on_time(1000)),
            ),
            "5xx or no answer",
        ),
        (
            lambda m: (
                m.unanswered("HTTP 500"),
                m.logged_message((LOG, "a"), _on_time(1000)),
            ),
            "5xx or no answer",
        ),
    ],
)
def test_each_broken_promise_is_named(events, broken: str) -> None:  # type: ignore[no-untyped-def]
    model = _model()
    model.scheduled((LOG, "a"), 1000)
    events(model)
    assert list(model.check()["violations"]) == [broken]


def test_webhooks_may_arrive_twice_but_must_arrive() -> None:
    model = _model()
    model.scheduled((HOOK, "h"), 1000)
    assert list(model.check()["violations"]) == ["acknowledged, never delivered"]
    model.hooked_message((HOOK, "h"), _on_time(1000))
    model.hooked_message((HOOK, "h"), _on_time(1000))
    result = model.check()
    assert (result["violations"], result["webhook_duplicates"]) == ({}, 1)


def test_a_request_a_crash_cut_off_leaves_its_timers_uncertain() -> None:
    model = _model()
    model.scheduled((LOG, "a"), 1000)
    model.cut_off({(LOG, "a"): 3000, (LOG, "new"): 2000})  # a reschedule and a new one
    result = model.check()
    assert result["violations"] == {}  # neither must arrive: either may
    assert (result["uncertain"], result["expected_deliveries"]) == (2, 0)
    assert model.outstanding() == 0
    model.logged_message((LOG, "a"), _on_time(1000))  # the old time: allowed
    model.logged_message((LOG, "new"), _on_time(2000))
    model.logged_message((LOG, "new"), _on_time(2000))  # the same offset read again
    assert model.check()["violations"] == {}
    model.logged_message((LOG, "new"), Delivery(2000, 2005, 2007, offset=9))
    model.logged_message((LOG, "a"), Delivery(3000, 2999, 3001))
    assert set(model.check()["violations"]) == {"delivered twice into the log", "delivered early"}


def test_cancelled_timers_stay_away_and_404s_must_be_cancelled() -> None:
    model = _model()
    model.scheduled((LOG, "a"), 1000)
    model.scheduled((LOG, "b"), 1000)
    model.cancelled((LOG, "a"), "cancelled")
    model.logged_message((LOG, "b"), _on_time(1000))
    assert model.check()["violations"] == {}
    assert model.not_cancelled([(LOG, "a")]) == []
    assert model.not_cancelled([(LOG, "b")]) == [f"GET {(LOG, 'b')}: 404, never cancelled"]
    model.cut_off({(LOG, "b"): 0})  # a cancel a kill cut off may have removed it
    assert model.not_cancelled([(LOG, "b")]) == []


def test_the_services_counters_must_match_what_was_seen() -> None:
    model = _model()
    model.scheduled((LOG, "a"), 1000)
    model.scheduled((LOG, "b"), 1000)
    model.cancelled((LOG, "b"), "cancelled")
    model.logged_message((LOG, "a"), _on_time(1000))
    right = {"pending": 0, "in_flight": 0, "dead_lettered": 0, "delivered": 1, "cancelled": 1}
    assert counters_agree(right, model) == []
    wrong = {**right, "delivered": 2, "pending": 1}
    assert counters_agree(wrong, model) == [
        "/v1/stats pending = 1, the load saw 0",
        "/v1/stats delivered = 2, the load saw 1",
    ]
    model.count("cancel_cut_off")  # a crash took a cancel's answer: it may have removed
    assert counters_agree({**right, "cancelled": 2}, model) == []
    assert counters_agree({**right, "cancelled": 3}, model) == [
        "/v1/stats cancelled = 3, the load saw 1 to 2"
    ]


def test_the_receiver_takes_only_a_right_signature() -> None:
    body = b'{"id":"x"}'
    mac = hmac.new(b"s", b"17." + body, hashlib.sha256).hexdigest()
    assert _signed("s", f"t=17,v1={mac}", body)
    assert not _signed("s", f"t=18,v1={mac}", body)
    assert not _signed("other", f"t=17,v1={mac}", body)
    assert not _signed("s", "", body)


def _post(url: str, body: bytes, signature: str, declared: int | None = None) -> None:
    """One raw request; ``declared`` > len(body) sends a body cut short, then closes."""
    host, port = url.split("/")[2].split(":")
    head = (
        f"POST /hook HTTP/1.1\r\nHost: x\r\nContent-Length: {declared or len(body)}\r\n"
        f"Timerstore-Signature: {signature}\r\nConnection: close\r\n\r\n"
    )
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(head.encode() + body)
        if declared is None:
            sock.recv(1024)  # the answer's first bytes
        else:
            sock.shutdown(socket.SHUT_WR)


def test_the_receiver_reports_deliveries_bad_signatures_and_cut_short_requests() -> None:
    model = _model()
    server, url, thread = start_receiver("s", 0.0, 1, model)
    try:
        body = json.dumps(
            {"topic": HOOK, "id": "h", "deliver_at_ms": 5, "delivered_at_ms": 6, "attempt": 1}
        )
        mac = hmac.new(b"s", b"17." + body.encode(), hashlib.sha256).hexdigest()
        _post(url, body.encode(), f"t=17,v1={mac}")
        _post(url, body.encode(), "t=17,v1=0")
        _post(url, body.encode()[:10], f"t=17,v1={mac}", declared=len(body))
        deadline = time.monotonic() + 10
        while model.counts["webhook_cut_short"] == 0 and time.monotonic() < deadline:
            time.sleep(0.01)  # the handler thread reads until the client's close
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
    assert [d.deliver_at_ms for d in model.hooked[(HOOK, "h")]] == [5, 5]  # signed or not
    assert model.errors == [f"webhook with a bad signature: {body.encode()!r}"]
    assert model.counts["webhook_cut_short"] == 1


@pytest.mark.slow
def test_a_short_soak_of_the_real_server_keeps_every_promise(tmp_path: Path) -> None:
    options = SoakOptions(seconds=6, rate=600, batch=60, max_delay_ms=1500, hook_fail=0.2, seed=7)
    result = soak(options, str(tmp_path / "data"))
    assert result["violations"] == {}
    assert result["drained"] and result["settled"]
    counts = result["counts"]
    assert counts["scheduled"] >= 600  # the load ran: the promises were tested, not vacuous
    assert counts["cancel_cancelled"] > 0 and counts["rescheduled"] > 0
    assert result["log_deliveries"] > 0 and result["webhook_deliveries"] > 0
    assert result["final_stats"]["delivered"] == result["expected_deliveries"]
    samples = result["samples"]  # every 2 s: glibc's gauge is read from /metrics
    assert samples and all(s["malloc_in_use_mb"] > 0 for s in samples)


@pytest.mark.slow
def test_a_soak_with_crashes_loses_no_acknowledged_timer(tmp_path: Path) -> None:
    """SIGKILL twice under load: every acknowledged timer still arrives, once in the log."""
    options = SoakOptions(
        seconds=9, rate=600, batch=60, max_delay_ms=1500, hook_fail=0.2, seed=11, kill_every_s=3
    )
    result = soak(options, str(tmp_path / "data"))
    assert result["crashes"] == 2
    assert result["violations"] == {}
    assert result["drained"] and result["settled"]
    assert result["counts"]["cut_off_by_a_crash"] > 0  # the crashes hit requests in flight
    assert result["log_deliveries"] > 0 and result["webhook_deliveries"] > 0


def test_the_sampler_reads_rocksdbs_and_mallocs_memory_gauges() -> None:
    text = (
        "# HELP timerstore_rocksdb_memtable_bytes Memtables, all families\n"
        "timerstore_rocksdb_memtable_bytes 2097152.0\n"
        "timerstore_rocksdb_table_readers_bytes 1048576.0\n"
        "timerstore_rocksdb_block_cache_usage_bytes 0.0\n"
        "timerstore_rocksdb_block_cache_capacity_bytes 67108864.0\n"
        'timerstore_malloc_bytes{state="in_use"} 3145728.0\n'
        'timerstore_malloc_bytes{state="free"} 524288.0\n'
    )
    assert memory_gauges(text) == {
        "memtable_mb": 2.0,
        "table_readers_mb": 1.0,
        "block_cache_usage_mb": 0.0,
        "malloc_in_use_mb": 3.0,
        "malloc_free_mb": 0.5,
    }


def test_settings_for_the_service_are_taken_as_timerstore_variables_only() -> None:
    options, _ = parse_args(["--setting", "TIMERSTORE_MEMORY__MALLOC_ARENA_MAX=0"])
    assert options.settings == {"TIMERSTORE_MEMORY__MALLOC_ARENA_MAX": "0"}
    for bad in ("MALLOC_ARENA_MAX=2", "TIMERSTORE_MEMORY__MALLOC_ARENA_MAX"):
        with pytest.raises(SystemExit) as exited:
            parse_args(["--setting", bad])
        assert exited.value.code == 2  # argparse's usage error
