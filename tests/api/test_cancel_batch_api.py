"""POST /v1/timers/cancel: each identity answered on its own, every bad item named."""

from __future__ import annotations

import itertools

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.api.helpers import FailingSink, FakeApi
from tests.api.test_metrics import scrape

MSGPACK = {"content-type": "application/msgpack"}


def _schedule(api: FakeApi, topic: str, ids: list[str], delay_ms: int = 1000) -> None:
    timers = [{"topic": topic, "id": i, "delay_ms": delay_ms} for i in ids]
    assert api.client.post("/v1/timers/batch", json={"timers": timers}).status_code == 200


def _refs(topic: str, ids: list[str]) -> dict:
    return {"timers": [{"topic": topic, "id": i} for i in ids]}


def test_each_identity_gets_the_answer_a_delete_would_give(fake_api: FakeApi) -> None:
    _schedule(fake_api, "due", ["d1"], delay_ms=0)
    fake_api.deliver_due()
    _schedule(fake_api, "orders", ["o1", "o2", "o3"])
    body = _refs("orders", ["o2", "nope", "o1"])
    body["timers"].append({"topic": "due", "id": "d1"})
    r = fake_api.client.post("/v1/timers/cancel", json=body)
    assert r.status_code == 200, r.text
    assert r.json() == {
        "cancelled": 2,
        "timers": [
            {"topic": "orders", "id": "o2", "outcome": "cancelled"},
            {"topic": "orders", "id": "nope", "outcome": "unknown"},
            {"topic": "orders", "id": "o1", "outcome": "cancelled"},
            {"topic": "due", "id": "d1", "outcome": "too_late", "state": "delivered"},
        ],
    }
    assert fake_api.client.get("/v1/timers/orders/o1").status_code == 404
    assert fake_api.client.get("/v1/timers/orders/o3").json()["state"] == "pending"
    assert fake_api.stats()["pending"] == 1
    counted = scrape(fake_api)  # each identity is counted by its outcome
    assert counted.value("timerstore_timers_cancelled_total", outcome="removed") == 2
    assert counted.value("timerstore_timers_cancelled_total", outcome="unknown") == 1
    assert counted.value("timerstore_timers_cancelled_total", outcome="too_late") == 1
    # a DELETE of the same identities now answers as the batch's second look would
    assert fake_api.client.delete("/v1/timers/orders/o2").status_code == 404
    assert fake_api.client.delete("/v1/timers/due/d1").status_code == 409


def test_msgpack_and_an_identity_given_twice(fake_api: FakeApi) -> None:
    _schedule(fake_api, "mp", ["a", "b"])
    body = msgspec.msgpack.encode(_refs("mp", ["a", "a", "b"]))
    r = fake_api.client.post("/v1/timers/cancel", content=body, headers=MSGPACK)
    assert r.status_code == 200, r.text
    assert [t["outcome"] for t in r.json()["timers"]] == ["cancelled", "unknown", "cancelled"]
    assert r.json()["cancelled"] == 2 and fake_api.stats()["pending"] == 0


def test_a_dead_letter_goes_with_its_identity(fake_api_factory) -> None:
    api: FakeApi = fake_api_factory(sink=FailingSink(), engine={"max_attempts": 1})
    _schedule(api, "dl", ["x"], delay_ms=0)
    api.deliver_due()
    assert api.client.get("/v1/deadletters", params={"topic": "dl"}).json()["timers"]
    r = api.client.post("/v1/timers/cancel", json=_refs("dl", ["x"]))
    assert r.json()["timers"][0]["outcome"] == "cancelled"
    assert api.client.get("/v1/deadletters", params={"topic": "dl"}).json()["timers"] == []


def test_bad_items_are_each_named_and_nothing_is_cancelled(fake_api: FakeApi) -> None:
    _schedule(fake_api, "orders", ["o0", "o1", "o2", "o3"])
    timers = [{"topic": "orders", "id": f"o{i}"} for i in range(6)]
    timers[1]["id"] = "a b"  # the name rule (checked after decoding)
    timers[2]["topic"] = 7  # wrong type (decode)
    timers[3] = {"topic": "orders"}  # a missing field
    timers[4]["extra"] = True  # an unknown field
    r = fake_api.client.post("/v1/timers/cancel", json={"timers": timers})
    assert r.status_code == 422, r.text
    assert [(p["index"], p["field"]) for p in r.json()["error"]["problems"]] == [
        (1, "timers[1].id"),
        (2, "timers[2].topic"),
        (3, "timers[3].id"),
        (4, "timers[4].extra"),
    ]
    assert fake_api.stats()["pending"] == 4  # o0, the one good item, was not cancelled


def test_bad_names_in_a_batch_that_decodes_whole(fake_api: FakeApi) -> None:
    _schedule(fake_api, "orders", ["o0"])
    body = {"timers": [{"topic": "orders", "id": "o0"}, {"topic": "ordérs", "id": "two\nlines"}]}
    r = fake_api.client.post("/v1/timers/cancel", json=body)
    assert r.status_code == 422, r.text
    problems = r.json()["error"]["problems"]
    assert [p["field"] for p in problems] == ["timers[1].topic", "timers[1].id"]
    assert all("may contain only A-Z a-z 0-9 . _ : -" in p["message"] for p in problems)
    assert fake_api.stats()["pending"] == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"timers": []}, "timers"),
        ({"timers": [{"topic": "t", "id": str(i)} for i in range(6)]}, "timers"),
        ({"items": []}, "items"),
        ([], "body"),
    ],
)
def test_envelope_and_count(fake_api_factory, body: object, field: str) -> None:
    api: FakeApi = fake_api_factory(limits={"max_batch_timers": 5})
    r = api.client.post("/v1/timers/cancel", json=body)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == field


def test_media_type_and_size(fake_api_factory) -> None:
    api: FakeApi = fake_api_factory(limits={"max_body_bytes": 64})
    plain = {"content-type": "text/plain"}
    r = api.client.post("/v1/timers/cancel", content=b"{}", headers=plain)
    assert r.status_code == 415 and r.json()["error"]["field"] == "Content-Type"
    r = api.client.post("/v1/timers/cancel", json=_refs("t", ["x" * 40, "y" * 40]))
    assert r.status_code == 413 and r.json()["error"]["field"] == "body"


_TOPICS = itertools.count()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    scheduled=st.sets(st.sampled_from("abcdefgh")),
    asked=st.lists(st.sampled_from("abcdefghij"), min_size=1, max_size=12),
)
def test_outcomes_follow_a_model(fake_api: FakeApi, scheduled: set[str], asked: list[str]) -> None:
    """Against a model: the first mention of a pending identity is cancelled, every other
    mention (and every identity never scheduled) is unknown; the rest stay pending. Each
    example has a topic of its own in the one store."""
    api, topic = fake_api, f"m{next(_TOPICS)}"
    if scheduled:
        _schedule(api, topic, sorted(scheduled))
    r = api.client.post("/v1/timers/cancel", json=_refs(topic, asked))
    assert r.status_code == 200, r.text
    left, expected = set(scheduled), []
    for timer_id in asked:
        expected.append("cancelled" if timer_id in left else "unknown")
        left.discard(timer_id)
    assert [t["outcome"] for t in r.json()["timers"]] == expected
    assert [t["id"] for t in r.json()["timers"]] == asked
    assert r.json()["cancelled"] == expected.count("cancelled")
    listed = api.client.get("/v1/timers", params={"topic": topic}).json()["timers"]
    assert {t["id"] for t in listed} == left
