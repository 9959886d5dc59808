"""The webhook sink against real receivers on 127.0.0.1: signatures, retries, dead letters."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time

from storage.protocol import LOG_SINK, NewTimer, TimerState
from tests.sinks.sink_settings import sink_settings
from tests.waiting import wait_for


def now_ms() -> int:
    return int(time.time() * 1000)


def test_1000_signed_posts_retry_every_tenth_and_none_early(routed, receiver):
    failed_once: set[str] = set()

    def first_attempt_of_every_tenth_fails(body):
        tenth = body["id"].startswith("t") and int(body["id"][1:]) % 10 == 0
        if tenth and body["attempt"] == 1:
            failed_once.add(body["id"])
            return 503
        return 200

    recv, url = receiver(rule=first_attempt_of_every_tenth_fails)
    r = routed()
    r.route("orders", sink="webhook", url=url, secret="s3cr3t", max_attempts=3)
    start = now_ms()
    timers = [NewTimer("orders", f"t{i}", start + 200 + i, f"p{i}".encode()) for i in range(1000)]
    timers += [NewTimer("orders", "bin", start + 100, b"\x00\xff", {"k": "v"}, binary=True)]
    timers += [NewTimer("logged", f"l{i}", start + 100) for i in range(50)]
    r.store.schedule(timers, start)
    wait_for(lambda: r.store.stats().delivered == len(timers), what="every timer delivered")

    ok = recv.ok()
    assert sorted(a.body["id"] for a in ok) == sorted(t.id for t in timers if t.topic == "orders")
    assert all(a.signed for a in recv.arrivals), "every signature verifies"
    assert all(a.headers["Idempotency-Key"] == f"orders/{a.body['id']}" for a in recv.arrivals)
    assert all(a.headers["Content-Type"] == "application/json" for a in recv.arrivals)
    due = {t.id: t.deliver_at_ms for t in timers}
    assert all(a.received_ms >= due[a.body["id"]] for a in recv.arrivals), "none early"
    assert all(a.body["delivered_at_ms"] >= a.body["deliver_at_ms"] for a in recv.arrivals)
    assert failed_once == {f"t{i}" for i in range(0, 1000, 10)}
    by_id = {a.body["id"]: a.body for a in ok}
    assert by_id["t10"]["attempt"] == 2 and by_id["t11"]["attempt"] == 1
    assert by_id["t7"]["payload"] == "p7" and by_id["t7"]["headers"] == {}
    assert base64.b64decode(by_id["bin"]["payload_b64"]) == b"\x00\xff"
    assert by_id["bin"]["headers"] == {"k": "v"} and "payload" not in by_id["bin"]
    view = r.store.get("orders", "t10")
    assert (view.state, view.sink, view.attempts) == (TimerState.DELIVERED, "webhook", 2)
    assert r.store.get("logged", "l3").sink == LOG_SINK
    assert r.store.stats().delivered_by_sink == {"webhook": 1001, LOG_SINK: 50}
    assert sorted(m.id for m in r.store.read_log("logged", 0, 100)) == sorted(
        f"l{i}" for i in range(50)
    )
    assert r.store.read_log("orders", 0, 10) == []


def test_always_failing_route_dead_letters_after_max_attempts_then_replay(routed, receiver):
    healthy = {"on": False}
    recv, url = receiver(rule=lambda body: 200 if healthy["on"] else 500)
    r = routed()
    r.route("down", sink="webhook", url=url, secret="s3cr3t", max_attempts=3)
    start = now_ms()
    r.store.schedule([NewTimer("down", f"d{i}", start) for i in range(20)], start)
    wait_for(lambda: r.store.stats().dead_lettered == 20, what="20 dead letters")
    assert len(recv.arrivals) == 60 and not recv.ok()  # exactly max_attempts each
    letter = r.store.get("down", "d0")
    assert letter.state == TimerState.DEAD_LETTERED and letter.attempts == 3
    assert letter.last_error == "webhook answered 500"

    healthy["on"] = True
    for i in range(20):
        r.store.replay_dead_letter("down", f"d{i}", now_ms())
    wait_for(lambda: r.store.stats().delivered == 20, what="replayed timers delivered")
    assert sorted(a.body["id"] for a in recv.ok()) == sorted(f"d{i}" for i in range(20))
    assert r.store.stats().dead_lettered == 0


def test_hung_receiver_times_out_as_a_failed_attempt(routed, receiver):
    _, url = receiver(rule=lambda body: None, hang_s=1.5)
    r = routed()
    r.route("hung", sink="webhook", url=url, secret="s3cr3t", timeout_ms=200, max_attempts=1)
    r.store.schedule([NewTimer("hung", "h1", now_ms())], now_ms())
    wait_for(lambda: r.store.stats().dead_lettered == 1, what="the hung timer dead-lettered")
    assert r.store.get("hung", "h1").last_error == "webhook timed out"


def test_a_slow_response_past_the_route_timeout_is_a_failed_attempt(routed, receiver):
    """The route's timeout bounds the whole attempt: a receiver that answers 200 but
    sends its body a byte every 100 ms (2 s in all) never makes one read wait 300 ms."""
    _, url = receiver(body_bytes=20, byte_interval_s=0.1)
    r = routed()
    r.route("trickle", sink="webhook", url=url, secret="s3cr3t", timeout_ms=300, max_attempts=1)
    r.store.schedule([NewTimer("trickle", "t1", now_ms())], now_ms())

    def settled() -> bool:
        stats = r.store.stats()
        return stats.delivered + stats.dead_lettered == 1

    wait_for(settled, what="the attempt settled")
    view = r.store.get("trickle", "t1")
    assert (view.state, view.last_error) == (TimerState.DEAD_LETTERED, "webhook timed out")


def test_saturated_route_defers_without_holding_up_other_topics(routed, receiver):
    recv, url = receiver(rule=lambda body: None, hang_s=1.0)
    r = routed(concurrency=2, max_in_flight=4, busy_retry_ms=100)
    r.route("slow", sink="webhook", url=url, secret="s3cr3t")
    start = now_ms()
    r.store.schedule([NewTimer("slow", f"s{i}", start) for i in range(4)], start)
    wait_for(lambda: recv.in_progress == 2, what="two requests hanging at the receiver")
    r.store.schedule([NewTimer("slow", f"s{i}", start) for i in range(4, 12)], start)
    r.store.schedule([NewTimer("fast", f"f{i}", start) for i in range(100)], start)
    wait_for(lambda: len(r.store.read_log("fast", 0, 200)) == 100, what="the log topic")
    assert len(recv.arrivals) < 12  # the slow route is still busy
    assert recv.max_in_progress <= 2  # the route's concurrency bound
    wait_for(lambda: r.store.stats().delivered == 112, timeout_s=90, what="the slow route")
    assert sorted(int(a.body["id"][1:]) for a in recv.ok()) == list(range(12))
    # deferral is not an attempt: each slow timer was delivered on its first attempt
    assert {a.body["attempt"] for a in recv.arrivals} == {1}


def test_signature_is_hmac_sha256_over_t_dot_body():
    from app.engine.webhook_sink import sign

    body = b'{"id":"x"}'
    mac = hmac.new(b"k", b"1700000000000." + body, hashlib.sha256).hexdigest()
    assert sign("k", 1_700_000_000_000, body) == f"t=1700000000000,v1={mac}"


def test_route_change_applies_to_timers_due_after_it(rocks_store, receiver):
    from app.clock import FakeClock
    from app.engine import Engine
    from app.engine.routing_sink import RoutingSink
    from app.routing import Route, RouteTable, check_route
    from tests.sinks.conftest import FAST, SENDERS

    recv, url = receiver()
    clock = FakeClock(1_700_000_000_000)
    t0 = clock.now_ms()
    settings = sink_settings()
    routes = RouteTable(rocks_store.control)
    engine = Engine(rocks_store, clock, FAST, sink=RoutingSink(routes, settings, clock, SENDERS))
    rocks_store.schedule(
        [NewTimer("o", "before", t0 - 1000), NewTimer("o", "after", t0 + 5000)], t0
    )
    hook = check_route(Route("webhook", url, "s3cr3t"), settings)
    # "before" fell due (and was scheduled) before the change: it keeps the log; a timer
    # scheduled in the very millisecond of a change counts as scheduled after it
    routes.put("o", hook, t0 + 1)
    try:
        assert engine.run_once(t0) == 1
        clock.advance(5000)

        def delivered_both() -> bool:  # run_once also commits what the lane settled
            engine.run_once(clock.now_ms())
            return rocks_store.stats().delivered == 2

        wait_for(delivered_both, what="the webhook delivery")
        routes.delete("o", clock.now_ms())  # back to the log for what falls due from now on
        rocks_store.schedule([NewTimer("o", "later", clock.now_ms() + 10)], clock.now_ms())
        assert engine.run_once(clock.advance(10)) == 1
    finally:
        engine.stop()
    assert [m.id for m in rocks_store.read_log("o", 0, 10)] == ["before", "later"]
    assert [a.body["id"] for a in recv.arrivals] == ["after"]
    assert rocks_store.get("o", "after").sink == "webhook"


def test_a_past_due_timer_scheduled_after_a_route_change_takes_the_new_route(rocks_store, receiver):
    """A past-due timer's key time is clamped to the scan cursor, which lags the clock by
    up to a tick: scheduled right after a route was set, it still falls due after it."""
    from app.clock import FakeClock
    from app.engine import Engine
    from app.engine.routing_sink import RoutingSink
    from app.routing import Route, RouteTable, check_route
    from tests.sinks.conftest import FAST, SENDERS

    recv, url = receiver()
    clock = FakeClock(1_700_000_000_000)
    settings = sink_settings()
    routes = RouteTable(rocks_store.control)
    engine = Engine(rocks_store, clock, FAST, sink=RoutingSink(routes, settings, clock, SENDERS))
    try:
        assert engine.run_once(clock.now_ms()) == 0  # the scan cursor is at now + 1
        routes.put("o", check_route(Route("webhook", url, "s3cr3t"), settings), clock.advance(5))
        now = clock.advance(1)
        [result] = rocks_store.schedule([NewTimer("o", "overdue", now - 60_000)], now)
        assert result.deliver_at_ms < now - 1  # clamped to the cursor, before the change

        def delivered() -> bool:  # run_once also commits what the lane settled
            engine.run_once(clock.now_ms())
            return rocks_store.stats().delivered == 1

        wait_for(delivered, what="the overdue timer delivered")
    finally:
        engine.stop()
    assert rocks_store.get("o", "overdue").sink == "webhook"
    assert [a.body["id"] for a in recv.ok()] == ["overdue"]
    assert rocks_store.read_log("o", 0, 10) == []


def test_a_route_whose_client_cannot_be_built_fails_attempts_not_the_engine(rocks_store):
    from app.clock import SystemClock
    from app.engine import Engine
    from app.engine.routing_sink import RoutingSink
    from app.routing import Route, RouteTable, check_route
    from tests.sinks.conftest import FAST

    def broken(route, settings, clock):
        raise RuntimeError("no client today")

    clock, settings = SystemClock(), sink_settings()
    routes = RouteTable(rocks_store.control)
    sink = RoutingSink(routes, settings, clock, {"webhook": broken})
    route = Route("webhook", "http://127.0.0.1:9/x", "k", max_attempts=2)
    routes.put("b", check_route(route, settings), clock.now_ms())
    engine = Engine(rocks_store, clock, FAST, sink=sink)
    rocks_store.schedule([NewTimer("b", "x", clock.now_ms()), NewTimer("l", "y", 0)], now_ms())
    engine.start()
    try:
        wait_for(lambda: rocks_store.stats().dead_lettered == 1, what="the dead letter")
        wait_for(lambda: rocks_store.stats().delivered == 1, what="the log timer")
    finally:
        engine.stop()
    assert rocks_store.get("b", "x").last_error == "RuntimeError: no client today"
    assert engine.running is False and [m.id for m in rocks_store.read_log("l", 0, 5)] == ["y"]


def test_lanes_of_replaced_routes_are_closed(rocks_store, receiver):
    from app.clock import SystemClock
    from app.engine import Engine
    from app.engine.routing_sink import RoutingSink
    from app.routing import Route, RouteTable, check_route
    from tests.sinks.conftest import FAST, SENDERS

    recv, url = receiver()
    clock, settings = SystemClock(), sink_settings()
    routes = RouteTable(rocks_store.control)
    sink = RoutingSink(routes, settings, clock, SENDERS)
    engine = Engine(rocks_store, clock, FAST, sink=sink)
    engine.start()
    try:
        for n, secret in enumerate(["one", "two", "three"]):
            routes.put("r", check_route(Route("webhook", url, secret), settings), now_ms())
            rocks_store.schedule([NewTimer("r", f"x{n}", now_ms())], now_ms())
            wait_for(lambda n=n: rocks_store.stats().delivered == n + 1, what=f"timer {n}")
        # "one" is neither the route nor the one it replaced any more: its lane is gone
        assert sink.lane_count() == 2
    finally:
        engine.stop()
    assert [a.body["id"] for a in recv.ok()] == ["x0", "x1", "x2"]
