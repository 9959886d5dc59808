"""Structured logs: one JSON object per line, with the event and the timer's topic/id.

The engine runs on a real RocksDB store with a sink that raises, and with the service's
routing sink and webhook sender posting to a real receiver that answers 500 (they report
failures later, through the dispatcher's settle), so the dead-lettering and
delivery-failure lines are the ones the service writes; a subprocess test in
tests/api/test_serve_logs.py covers start, stop, the store line, housekeeping and
uvicorn's access log.
"""

from __future__ import annotations

import io
import json
import logging

import pytest

from app.engine import Engine, EngineSettings
from app.logs import configure_logging
from storage.protocol import LOG_SINK, NewTimer
from storage.rocks import RocksSettings, RocksTimerStore
from tests.app.webhook_engine import webhook_engine
from tests.sinks.receiver import Receiver
from tests.waiting import wait_for


def _lines(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_json_lines_carry_event_fields_and_exceptions(restore_logging) -> None:
    out = io.StringIO()
    configure_logging("json", "info", out)
    log = logging.getLogger("timerstore.test")
    log.info("plain %s", "words")
    log.warning("with fields", extra={"event": "dead_letter", "topic": "t", "timer_id": "x"})
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("failed", extra={"event": "error", "topic": "t", "timer_id": "y"})
    logging.getLogger("uvicorn.access").info(
        '%s - "%s %s HTTP/%s" %d', "127.0.0.1:5000", "POST", "/v1/timers", "1.1", 201
    )
    logging.getLogger("timerstore.test").debug("below the level")
    plain, fields, error, access = _lines(out)
    assert plain["message"] == "plain words" and plain["event"] == "log"
    assert plain["level"] == "info" and plain["logger"] == "timerstore.test"
    assert plain["ts"].endswith("+00:00") and "T" in plain["ts"]
    assert (fields["event"], fields["topic"], fields["timer_id"]) == ("dead_letter", "t", "x")
    assert error["exc_type"] == "ValueError" and "boom" in error["exc"]
    assert (error["level"], error["topic"], error["timer_id"]) == ("error", "t", "y")
    assert access["event"] == "access"
    assert (access["method"], access["path"], access["status"]) == ("POST", "/v1/timers", 201)
    assert access["client"] == "127.0.0.1:5000"


def test_text_is_the_default_format(restore_logging) -> None:
    out = io.StringIO()
    configure_logging("text", "info", out)
    logging.getLogger("timerstore.test").info("hello", extra={"event": "x"})
    line = out.getvalue().strip()
    assert line.endswith("INFO timerstore.test: hello")
    with pytest.raises(json.JSONDecodeError):
        json.loads(line)


class _DownSink:
    name = "broker"

    def start(self) -> None:
        return None

    def stop(self) -> None:
        return None

    def deliver(self, batch: object) -> None:
        raise ConnectionError("broker down")


def test_dead_letters_and_failures_are_logged_with_topic_and_id(
    restore_logging, rocks_store, clock
) -> None:
    out = io.StringIO()
    configure_logging("json", "info", out)
    engine = Engine(rocks_store, clock, EngineSettings(max_attempts=2), sink=_DownSink())
    now = clock.now_ms()
    rocks_store.schedule([NewTimer("orders", "o1", now), NewTimer("orders", "o2", now)], now)
    engine.run_once(now)  # attempt 1 fails: retried later
    engine.run_once(now + 60_000)  # attempt 2 fails: dead letters
    lines = _lines(out)
    failures = [x for x in lines if x["event"] == "delivery_failed"]
    assert len(failures) == 2
    assert failures[0]["sink"] == "broker" and failures[0]["count"] == 2
    assert (failures[0]["topic"], failures[0]["timer_id"]) == ("orders", "o1")
    assert failures[0]["error"] == "ConnectionError: broker down"
    dead = [(x["topic"], x["timer_id"]) for x in lines if x["event"] == "dead_letter"]
    assert dead == [("orders", "o1"), ("orders", "o2")]
    assert rocks_store.stats().dead_lettered == 2


def test_a_webhook_routes_failed_attempts_and_dead_letter_are_logged(
    restore_logging, rocks_store, clock
) -> None:
    out = io.StringIO()
    configure_logging("json", "info", out)
    receiver = Receiver("k", rule=lambda body: 500)
    url = receiver.start()
    engine, _ = webhook_engine(
        rocks_store, clock, "hooked", url, EngineSettings(backoff_base_ms=50), max_attempts=2
    )
    try:
        now = clock.now_ms()
        rocks_store.schedule([NewTimer("hooked", "h1", now)], now)

        def dead_lettered() -> bool:  # run_once also records what the lane settled
            engine.run_once(clock.advance(1000))
            return rocks_store.stats().dead_lettered == 1

        wait_for(dead_lettered, timeout_s=30, what="the webhook timer dead-lettered")
    finally:
        engine.stop()
        receiver.stop()
    assert len(receiver.arrivals) == 2
    lines = _lines(out)
    failures = [
        (x["level"], x["sink"], x["count"], x["topic"], x["timer_id"], x["error"])
        for x in lines
        if x["event"] == "delivery_failed"
    ]
    attempt = ("warning", "webhook", 1, "hooked", "h1", "webhook answered 500")
    assert failures == [attempt, attempt]  # one line per failed attempt
    dead = [(x["topic"], x["timer_id"]) for x in lines if x["event"] == "dead_letter"]
    assert dead == [("hooked", "h1")]


def test_webhook_requests_are_not_logged_one_by_one_nor_with_their_url(
    restore_logging, rocks_store, clock
) -> None:
    """httpx logged every POST of the webhook sender at info, with the route's full URL
    (its query token too): a line per batch at thousands of timers per second."""
    out = io.StringIO()
    configure_logging("json", "info", out)
    receiver = Receiver("k")
    url = receiver.start() + "?token=hook-t0ken"
    engine, _ = webhook_engine(rocks_store, clock, "hooked", url, EngineSettings())
    try:
        now = clock.now_ms()
        rocks_store.schedule([NewTimer("hooked", f"h{i}", now) for i in range(3)], now)

        def delivered() -> bool:
            engine.run_once(clock.advance(10))
            return rocks_store.stats().delivered == 3

        wait_for(delivered, timeout_s=30, what="the webhook timers delivered")
    finally:
        engine.stop()
        receiver.stop()
    assert len(receiver.arrivals) >= 1
    text = out.getvalue()
    assert "hook-t0ken" not in text, text
    assert [x for x in _lines(out) if x["logger"].startswith(("httpx", "httpcore"))] == []


class _CommitFailsOnce(RocksTimerStore):
    """A real RocksDB store whose first commit fails, like a full disk (fault injection)."""

    failed = False

    def commit_delivered(self, timers, delivered_ms, *, sink=LOG_SINK):  # type: ignore[override]
        if not self.failed:
            self.failed = True
            raise OSError("No space left on device")
        return super().commit_delivered(timers, delivered_ms, sink=sink)


def test_a_failed_commit_is_logged_with_topic_and_id(restore_logging, tmp_path, clock) -> None:
    out = io.StringIO()
    configure_logging("json", "info", out)
    store = _CommitFailsOnce(RocksSettings(str(tmp_path / "rocks")))
    try:
        engine = Engine(store, clock, EngineSettings())
        now = clock.now_ms()
        store.schedule([NewTimer("orders", "o1", now)], now)
        with pytest.raises(OSError):
            engine.run_once(now)
        (error,) = [x for x in _lines(out) if x["event"] == "error"]
        assert (error["topic"], error["timer_id"], error["count"]) == ("orders", "o1", 1)
        assert error["level"] == "error"
        assert store.stats().pending == 1 and store.stats().in_flight == 0  # released
        assert engine.run_once(now) == 1
    finally:
        store.close()
