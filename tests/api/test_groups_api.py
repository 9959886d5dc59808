"""Consumer groups on the embedded log: committed offsets, lag, conflicts, durability."""

from __future__ import annotations

import signal
import time

import httpx
import pytest

from tests.api.helpers import ServerProcess


def deliver(api, topic: str, n: int, first: int = 0) -> None:
    timers = [{"topic": topic, "id": f"m{first + i:03d}", "delay_ms": i} for i in range(n)]
    assert api.client.post("/v1/timers/batch", json={"timers": timers}).status_code == 200
    api.clock.advance(n + 1)
    assert api.deliver_due() == n


def ids(response) -> list[str]:
    assert response.status_code == 200, response.text
    return [m["id"] for m in response.json()["messages"]]


def test_two_groups_read_independently_and_lag_is_exact(fake_api):
    deliver(fake_api, "orders", 5)
    c = fake_api.client
    read = "/v1/topics/orders/messages"
    assert ids(c.get(read, params={"group": "billing", "limit": 2})) == ["m000", "m001"]
    r = c.post("/v1/topics/orders/groups/billing/commit", json={"offset": 2})
    assert r.status_code == 200, r.text
    assert r.json() == {"group": "billing", "committed_offset": 2, "lag": 3}
    assert ids(c.get(read, params={"group": "billing"})) == ["m002", "m003", "m004"]
    assert ids(c.get(read, params={"group": "audit", "limit": 1})) == ["m000"]  # new: from 0
    listed = c.get("/v1/topics/orders/groups").json()
    assert listed == {
        "topic": "orders", "log_end_offset": 5,
        "groups": [{"group": "billing", "committed_offset": 2, "lag": 3}],
    }  # fmt: skip
    assert c.post("/v1/topics/orders/groups/audit/commit", json={"offset": 5}).status_code == 200
    groups = {g["group"]: g for g in c.get("/v1/topics/orders/groups").json()["groups"]}
    assert groups["audit"]["lag"] == 0 and groups["billing"]["lag"] == 3
    assert ids(c.get(read, params={"group": "audit"})) == []


def test_topics_list_carries_each_topics_sink_and_group_lag(fake_api):
    deliver(fake_api, "orders", 4)
    c = fake_api.client
    assert c.post("/v1/topics/orders/groups/billing/commit", json={"offset": 1}).status_code == 200
    assert c.post("/v1/topics/orders/groups/audit/commit", json={"offset": 4}).status_code == 200
    hook = {"sink": "webhook", "url": "http://127.0.0.1:9/hook", "secret": "s3cr3t-value"}
    assert c.put("/v1/topics/hooked/route", json=hook).status_code == 200  # no timers yet
    topics = {t["topic"]: t for t in c.get("/v1/topics").json()["topics"]}
    assert topics["orders"] == {
        "topic": "orders", "pending": 0, "log_end_offset": 4, "sink": "log",
        "groups": [
            {"group": "audit", "committed_offset": 4, "lag": 0},
            {"group": "billing", "committed_offset": 1, "lag": 3},
        ],
    }  # fmt: skip
    assert topics["hooked"] == {
        "topic": "hooked", "pending": 0, "log_end_offset": 0, "sink": "webhook", "groups": [],
    }  # fmt: skip
    deliver(fake_api, "orders", 2, first=4)  # two more in the log: billing's lag follows
    again = {t["topic"]: t for t in c.get("/v1/topics").json()["topics"]}
    assert [g["lag"] for g in again["orders"]["groups"]] == [2, 5]
    assert c.delete("/v1/topics/hooked/route").status_code == 200
    assert "hooked" not in {t["topic"] for t in c.get("/v1/topics").json()["topics"]}


def test_commit_never_moves_back_unless_forced_nor_past_the_log_end(fake_api):
    deliver(fake_api, "t", 3)
    c = fake_api.client
    url = "/v1/topics/t/groups/g/commit"
    assert c.post(url, json={"offset": 3}).status_code == 200
    back = c.post(url, json={"offset": 1})
    assert back.status_code == 409 and back.json()["error"]["field"] == "offset"
    past = c.post(url, json={"offset": 4})
    assert past.status_code == 409 and "past the log end" in past.json()["error"]["message"]
    assert c.get("/v1/topics/t/groups").json()["groups"][0]["committed_offset"] == 3
    forced = c.post(url, json={"offset": 1, "force": True})
    assert forced.status_code == 200 and forced.json()["committed_offset"] == 1


@pytest.mark.parametrize(
    ("url", "body", "field"),
    [
        ("/v1/topics/t/groups/g/commit", {"offset": -1}, "offset"),
        ("/v1/topics/t/groups/g/commit", {"offset": "x"}, "offset"),
        ("/v1/topics/t/groups/g/commit", {}, "offset"),
        ("/v1/topics/t/groups/g/commit", {"offset": 0, "colour": 1}, "colour"),
        ("/v1/topics/t/groups/bad group/commit", {"offset": 0}, "group"),
        ("/v1/topics/bad topic/groups/g/commit", {"offset": 0}, "topic"),
    ],
)
def test_bad_commits_are_422_naming_the_field(fake_api, url, body, field):
    r = fake_api.client.post(url, json=body)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == field
    assert fake_api.client.get("/v1/topics/t/groups").json()["groups"] == []


def test_an_offset_given_with_a_group_wins_and_a_bad_group_is_422(fake_api):
    alone = fake_api.client.get("/v1/topics/t/messages", params={"offset": 5})
    both = fake_api.client.get("/v1/topics/t/messages", params={"offset": 5, "group": "g"})
    group = fake_api.client.get("/v1/topics/t/messages", params={"group": "g"})
    assert both.status_code == 200 and both.json() == alone.json()
    assert group.json()["next_offset"] != alone.json()["next_offset"]
    r = fake_api.client.get("/v1/topics/t/messages", params={"group": "no way"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "group"


@pytest.mark.slow
@pytest.mark.parametrize("store", ["rocks", "wheel"])
def test_committed_offsets_survive_restart_and_sigkill(tmp_path, store):
    server = ServerProcess(tmp_path / "data", {"TIMERSTORE_STORE": store})
    try:
        url = server.start()
        timers = [{"topic": "k", "id": f"m{i}", "delay_ms": 0} for i in range(4)]
        assert httpx.post(url + "/v1/timers/batch", json={"timers": timers}).status_code == 200
        deadline = time.monotonic() + 30
        while httpx.get(url + "/v1/stats").json()["delivered"] < 4:
            assert time.monotonic() < deadline, "not delivered"
            time.sleep(0.02)
        assert (
            httpx.post(url + "/v1/topics/k/groups/a/commit", json={"offset": 3}).status_code == 200
        )
        assert (
            httpx.post(url + "/v1/topics/k/groups/b/commit", json={"offset": 1}).status_code == 200
        )
        server.signal(signal.SIGTERM)
        server.wait()
        url = server.start()
        assert (
            httpx.post(url + "/v1/topics/k/groups/b/commit", json={"offset": 2}).status_code == 200
        )
        server.signal(signal.SIGKILL)
        server.wait()
        url = server.start()
        listed = httpx.get(url + "/v1/topics/k/groups").json()
        assert listed["groups"] == [
            {"group": "a", "committed_offset": 3, "lag": 1},
            {"group": "b", "committed_offset": 2, "lag": 2},
        ]
        got = httpx.get(url + "/v1/topics/k/messages", params={"group": "a"}).json()
        assert [m["offset"] for m in got["messages"]] == [3]
    finally:
        server.kill()
