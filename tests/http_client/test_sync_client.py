"""The blocking client against a real server: every operation and its typed errors."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

from client import (
    CancelOutcome,
    Conflict,
    InvalidInput,
    MessagePage,
    NotFound,
    TimerStoreClient,
    TimerStoreClientError,
    Unauthorized,
    spec,
)
from client.errors import ServerError, error_from

FAR_MS = 4_000_000_000_000  # year 2096: never due during a test


def _consume_one(ts: TimerStoreClient, topic: str) -> MessagePage:
    """Long-poll until the topic's log has a message (bounded: 10 polls of 3 s)."""
    for _ in range(10):
        page = ts.consume(topic, offset=0, wait_ms=3000)
        if page.messages:
            return page
    raise AssertionError(f"nothing delivered on {topic}")


def test_schedule_get_and_reschedule(base_url: str) -> None:
    with TimerStoreClient(base_url) as ts:
        first = ts.schedule(
            "orders", id="o1", deliver_at_ms=FAR_MS, payload="text", headers={"a": "b"}
        )
        assert not first.replaced and first.timer.state == "pending"
        again = ts.schedule("orders", id="o1", deliver_at_ms=FAR_MS + 1, payload=b"\x00\xff")
        assert again.replaced and again.timer.deliver_at_ms == FAR_MS + 1
        got = ts.get("orders", "o1")
        assert (got.payload_b64, got.payload, got.headers) == (b"\x00\xff", None, {})
        assert got.deliver_at_ms == FAR_MS + 1
        made = ts.schedule("orders", delay_ms=600_000)
        assert made.timer.id and ts.get("orders", made.timer.id).id == made.timer.id


def test_schedule_many_and_page_through_pending(base_url: str) -> None:
    with TimerStoreClient(base_url) as ts:
        specs = [spec("p", id=f"t{i}", deliver_at_ms=FAR_MS + 10 * (5 - i)) for i in range(5)]
        done = ts.schedule_many(specs)
        assert done.scheduled == 5 and [t.id for t in done.timers] == [f"t{i}" for i in range(5)]
        page = ts.list_pending(topic="p", limit=2)
        assert [t.id for t in page.timers] == ["t4", "t3"] and page.next_cursor is not None
        # bounded: one more than expected, so a cursor that never ends fails instead of hanging
        paged = itertools.islice(ts.iter_pending(topic="p", limit=2), 6)
        assert [t.id for t in paged] == [f"t{i}" for i in (4, 3, 2, 1, 0)]
        window = ts.list_pending(topic="p", from_ms=FAR_MS + 10, to_ms=FAR_MS + 30)
        assert [t.id for t in window.timers] == ["t4", "t3", "t2"]


def test_cancel_says_what_it_did(base_url: str) -> None:
    with TimerStoreClient(base_url) as ts:
        ts.schedule("c", id="later", deliver_at_ms=FAR_MS)
        assert ts.cancel("c", "later").outcome is CancelOutcome.CANCELLED
        assert ts.cancel("c", "later").outcome is CancelOutcome.UNKNOWN
        ts.schedule("c", id="now", delay_ms=0)
        _consume_one(ts, "c")
        late = ts.cancel("c", "now")
        assert (late.outcome, late.state) == (CancelOutcome.TOO_LATE, "delivered")


def test_consume_long_polls_and_reads_on(base_url: str) -> None:
    with TimerStoreClient(base_url) as ts:
        ts.schedule("q", id="m1", delay_ms=0, payload=b"\x01\x02", headers={"k": "v"})
        page = _consume_one(ts, "q")
        (message,) = page.messages
        assert (message.id, message.payload_b64, message.headers) == ("m1", b"\x01\x02", {"k": "v"})
        assert message.offset == 0 and page.next_offset == 1
        assert ts.consume("q", offset=page.next_offset, wait_ms=50).messages == []
        assert ts.get("q", "m1").state == "delivered"
        assert {t.topic: t.log_end_offset for t in ts.topics()}["q"] == 1


def test_errors_carry_the_servers_code_and_field(base_url: str) -> None:
    with TimerStoreClient(base_url) as ts:
        with pytest.raises(InvalidInput) as bad_name:
            ts.schedule("no spaces", delay_ms=1)
        assert (bad_name.value.status, bad_name.value.code) == (422, "invalid")
        assert bad_name.value.field == "topic"
        with pytest.raises(InvalidInput) as both:
            ts.schedule("t", delay_ms=1, deliver_at_ms=FAR_MS)
        assert both.value.field is not None
        with pytest.raises(InvalidInput) as batch:
            ts.schedule_many([spec("t", delay_ms=1), spec("t", delay_ms=-5)])
        assert [(p.index, p.field) for p in batch.value.problems] == [(1, "timers[1].delay_ms")]
        assert ts.list_pending(topic="t").timers == []  # the batch stored nothing
        with pytest.raises(NotFound) as missing:
            ts.get("t", "nope")
        assert missing.value.code == "not_found" and missing.value.status == 404
        with pytest.raises(Conflict) as conflict:
            _reschedule_delivered(ts)
        assert conflict.value.state == "delivered"


def _reschedule_delivered(ts: TimerStoreClient) -> None:
    ts.schedule("d", id="x", delay_ms=0)
    _consume_one(ts, "d")
    ts.schedule("d", id="x", delay_ms=0)


def test_api_key_is_sent_and_its_absence_is_unauthorized(
    server_factory: Callable[..., str],
) -> None:
    url = server_factory(api_keys=["secret"])
    with TimerStoreClient(url) as anonymous, pytest.raises(Unauthorized) as denied:
        anonymous.get("t", "x")
    assert denied.value.code == "unauthorized" and denied.value.status == 401
    with TimerStoreClient(url, api_key="secret") as ts:
        assert ts.schedule("t", id="x", delay_ms=60_000).timer.id == "x"


def test_an_answer_that_is_not_the_error_shape_is_still_typed() -> None:
    proxy = error_from(502, b"<html>bad gateway</html>")
    assert isinstance(proxy, ServerError) and proxy.code == "http_error" and proxy.status == 502
    odd = error_from(418, b"")
    assert type(odd) is TimerStoreClientError and odd.message == "HTTP 418"


def test_dot_names_are_not_dot_segments(base_url: str) -> None:
    # "." and ".." are valid names; unescaped, URL normalization would drop them from the path
    with TimerStoreClient(base_url) as ts:
        for name in (".", "..", "a.b"):
            assert ts.schedule(".", id=name, deliver_at_ms=FAR_MS).timer.id == name
            assert ts.get(".", name).id == name
            assert ts.cancel(".", name).outcome is CancelOutcome.CANCELLED
        ts.schedule("..", id="m", delay_ms=0)
        assert [m.id for m in _consume_one(ts, "..").messages] == ["m"]


def test_consumer_groups_read_commit_and_list_with_lag(base_url: str) -> None:
    with TimerStoreClient(base_url) as ts:
        ts.schedule_many([spec("grp", id=f"g{i}", delay_ms=0) for i in range(3)])
        for _ in range(10):  # bounded: until all three are in the log
            if len(ts.consume("grp", offset=0, wait_ms=3000).messages) == 3:
                break
        first = ts.consume("grp", group="billing", limit=2)
        assert [m.offset for m in first.messages] == [0, 1]
        done = ts.commit("grp", "billing", first.next_offset)
        assert (done.group, done.committed_offset, done.lag) == ("billing", 2, 1)
        assert [m.offset for m in ts.consume("grp", group="billing").messages] == [2]
        assert [m.offset for m in ts.consume("grp", group="audit").messages] == [0, 1, 2]
        with pytest.raises(Conflict) as back:
            ts.commit("grp", "billing", 1)  # never backwards unless forced
        assert back.value.status == 409
        assert ts.commit("grp", "billing", 1, force=True).committed_offset == 1
        listed = ts.groups("grp")
        assert listed.log_end_offset == 3
        assert [(g.group, g.committed_offset, g.lag) for g in listed.groups] == [("billing", 1, 2)]
        topic = {t.topic: t for t in ts.topics()}["grp"]
        assert (topic.sink, topic.log_end_offset) == ("log", 3)
        assert [(g.group, g.lag) for g in topic.groups] == [("billing", 2)]


def test_topics_follow_every_page_and_list_topics_orders_by_pending(base_url: str) -> None:
    pending = {f"p{i}": i % 3 + 1 for i in range(7)}
    with TimerStoreClient(base_url) as ts:
        ts.schedule_many(
            [
                spec(t, id=f"x{n}", deliver_at_ms=FAR_MS)
                for t, c in pending.items()
                for n in range(c)
            ]
        )
        assert [(t.topic, t.pending) for t in ts.topics(limit=2)] == sorted(pending.items())
        page = ts.list_topics(order="pending", limit=3)
        assert [t.topic for t in page.topics] == ["p2", "p5", "p1"]
        assert page.total == 7 and page.next_cursor is not None
        rest = ts.list_topics(order="pending", limit=10, cursor=page.next_cursor)
        assert [t.topic for t in rest.topics] == ["p4", "p0", "p3", "p6"]
        assert rest.next_cursor is None
