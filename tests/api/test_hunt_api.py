"""Bugs a REST client hit, found by probing a running server: each test holds the fix."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
import pytest

from tests.api.helpers import FailingSink, FakeApi

MSGPACK = {"Content-Type": "application/msgpack"}


def _dead_letters_api(fake_api_factory, idents: Sequence[tuple[str, str]]) -> FakeApi:
    """An app whose timers ``idents`` (topic, id) are dead letters."""
    api: FakeApi = fake_api_factory(sink=FailingSink(), engine={"max_attempts": 1})
    timers = [{"topic": t, "id": i, "delay_ms": 0, "payload": f"old {i}"} for t, i in idents]
    assert api.client.post("/v1/timers/batch", json={"timers": timers}).status_code == 200
    api.deliver_due()
    assert _dead(api) == sorted(idents)
    return api


def _dead(api: FakeApi) -> list[tuple[str, str]]:
    page = api.client.get("/v1/deadletters").json()
    return [(t["topic"], t["id"]) for t in page["timers"]]


@pytest.mark.parametrize(
    ("url", "body", "field"),
    [
        ("/v1/timers", {"topic": "t", "delay_ms": 1, "headers": {1: "x"}}, "headers"),
        ("/v1/timers", {"topic": "t", "delay_ms": 1, "headers": {b"k": "x"}}, "headers"),
        (
            "/v1/timers/batch",
            {"timers": [{"topic": "t", "delay_ms": 1, "headers": {None: "x"}}]},
            "timers[0].headers",
        ),
    ],
)
def test_a_msgpack_header_name_that_is_not_a_string_names_headers(
    fake_api: FakeApi, url: str, body: dict, field: str
) -> None:
    """msgspec words a bad map key ``... - at `key` in `$.headers```: the 422 named
    ``body`` (or ``timers[0]``), not the field that broke the rule."""
    r = fake_api.client.post(url, content=msgspec.msgpack.encode(body), headers=MSGPACK)
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["field"] == field, error
    assert error["message"].startswith(f"{field}: Expected `str`"), error
    assert "key" in error["message"], error


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("?Topic=a", "Topic"),
        ("?topics=a", "topics"),
        ("?topic=a&tpic=b", "tpic"),
        ("?topic=a&topic=b", "topic"),
        ("?topic=b&topic=a", "topic"),
    ],
)
def test_purge_refuses_a_misspelt_or_repeated_filter_and_deletes_nothing(
    fake_api_factory, query: str, field: str
) -> None:
    """Without ``topic`` a purge deletes every dead letter: a misspelt filter purged them
    all, and a repeated one purged only the last topic given."""
    api = _dead_letters_api(fake_api_factory, [("a", "1"), ("b", "2")])
    r = api.client.delete("/v1/deadletters" + query)
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["field"] == field and error["message"].startswith(f"{field}: "), error
    assert _dead(api) == [("a", "1"), ("b", "2")]
    assert api.client.delete("/v1/deadletters?topic=a").json() == {"purged": 1}
    assert _dead(api) == [("b", "2")]


@pytest.mark.parametrize(("query", "field"), [("?id=x0", "id"), ("?topic=d", "topic")])
def test_topic_replay_refuses_a_query_parameter_and_replays_nothing(
    fake_api_factory, query: str, field: str
) -> None:
    """``POST /v1/deadletters/d/replay?id=x0``, meant to replay one timer, replayed every
    dead letter of the topic."""
    api = _dead_letters_api(fake_api_factory, [("d", "x0"), ("d", "x1")])
    r = api.client.post("/v1/deadletters/d/replay" + query)
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["field"] == field and error["message"].startswith(f"{field}: "), error
    assert _dead(api) == [("d", "x0"), ("d", "x1")]
    assert api.client.post("/v1/deadletters/d/replay").json() == {"replayed": 2}


def test_topic_replay_replays_every_other_dead_letter_past_one_scheduled_again(
    fake_api_factory,
) -> None:
    """A dead letter whose topic+id was scheduled anew made the topic replay stop there
    with a 409: the ones before it replayed, the ones after it not, the count lost, and
    every retry stuck at the same one (cancel would remove the new timer too)."""
    api = _dead_letters_api(fake_api_factory, [("d", "x0"), ("d", "x1"), ("d", "x2")])
    again = {"topic": "d", "id": "x1", "delay_ms": 60_000, "payload": "new"}
    assert api.client.post("/v1/timers", json=again).status_code == 201
    r = api.client.post("/v1/deadletters/d/replay")
    assert r.status_code == 200, r.text
    assert r.json() == {"replayed": 2}
    states = {i: api.client.get(f"/v1/timers/d/{i}").json() for i in ("x0", "x1", "x2")}
    assert {i: t["state"] for i, t in states.items()} == dict.fromkeys(states, "pending")
    assert states["x1"]["payload"] == "new"  # the new timer, untouched
    assert states["x2"]["payload"] == "old x2"
    assert _dead(api) == [("d", "x1")]  # left in place, as its own replay would be a 409
    assert api.client.post("/v1/deadletters/d/x1/replay").status_code == 409
    assert api.client.post("/v1/deadletters/d/replay").json() == {"replayed": 0}


def test_a_whole_msgpack_float_is_an_integer_as_in_json(fake_api: FakeApi) -> None:
    """The msgpack body has the JSON body's schema, where ``1000.0`` is the integer 1000:
    JSON took it, msgpack answered 422 ``Expected `int | null`, got `float```."""
    one = {"topic": "f", "id": "m", "delay_ms": 1000.0}
    r = fake_api.client.post("/v1/timers", content=msgspec.msgpack.encode(one), headers=MSGPACK)
    assert r.status_code == 201, r.text
    assert r.json()["requested_deliver_at_ms"] == fake_api.clock.now_ms() + 1000
    batch = {"timers": [{"topic": "f", "deliver_at_ms": 2e12, "payload_b64": b"\x00\x01"}]}
    body = msgspec.msgpack.encode(batch)
    r = fake_api.client.post("/v1/timers/batch", content=body, headers=MSGPACK)
    assert r.status_code == 200 and r.json()["timers"][0]["deliver_at_ms"] == 2 * 10**12, r.text
    (listed,) = [t for t in fake_api.client.get("/v1/timers?topic=f").json()["timers"]
                 if t["deliver_at_ms"] == 2 * 10**12]  # fmt: skip
    assert listed["payload_b64"] == "AAE="  # the bin payload kept through the rewrite
    for bad in (1000.5, 1e300, float("nan")):
        body = msgspec.msgpack.encode({"topic": "f", "delay_ms": bad})
        r = fake_api.client.post("/v1/timers", content=body, headers=MSGPACK)
        assert r.status_code == 422 and r.json()["error"]["field"] == "delay_ms", r.text
