"""POST /v1/timers/batch: JSON and msgpack, all or nothing, every bad item named."""

from __future__ import annotations

import msgspec

from tests.api.helpers import T0_MS, FakeApi

MSGPACK = {"content-type": "application/msgpack"}


def _timers(n: int, topic: str = "batch", delay_ms: int = 1000) -> list[dict]:
    return [{"topic": topic, "id": f"t{i:04d}", "delay_ms": delay_ms + i} for i in range(n)]


def test_json_batch_is_stored(fake_api: FakeApi) -> None:
    r = fake_api.client.post("/v1/timers/batch", json={"timers": _timers(25)})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["scheduled"] == 25 and len(body["timers"]) == 25
    assert body["timers"][3] == {"topic": "batch", "id": "t0003", "deliver_at_ms": T0_MS + 1003}
    assert fake_api.stats()["pending"] == 25
    assert fake_api.client.get("/v1/timers/batch/t0024").json()["state"] == "pending"


def test_msgpack_batch_with_binary_payload_and_generated_ids(fake_api: FakeApi) -> None:
    timers = [{"topic": "mp", "delay_ms": 0, "payload_b64": b"\x00\xff"} for _ in range(10)]
    r = fake_api.client.post(
        "/v1/timers/batch", content=msgspec.msgpack.encode({"timers": timers}), headers=MSGPACK
    )
    assert r.status_code == 200, r.text
    ids = [t["id"] for t in r.json()["timers"]]
    assert len(set(ids)) == 10 and ids == sorted(ids)
    fake_api.deliver_due()
    messages = fake_api.client.get("/v1/topics/mp/messages").json()["messages"]
    assert [m["payload_b64"] for m in messages] == ["AP8="] * 10


def test_batch_is_all_or_nothing_and_lists_every_bad_item(fake_api: FakeApi) -> None:
    timers = _timers(10)
    timers[2]["delay_ms"] = "soon"  # wrong type (decode)
    timers[5]["topic"] = "bad topic"  # charset (checked after decoding)
    timers[7]["deliver_at_ms"] = T0_MS  # both time fields (rule)
    timers[8]["surprise"] = 1  # unknown field
    r = fake_api.client.post("/v1/timers/batch", json={"timers": timers})
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert [(p["index"], p["field"]) for p in error["problems"]] == [
        (2, "timers[2].delay_ms"),
        (5, "timers[5].topic"),
        (7, "timers[7].deliver_at_ms"),
        (8, "timers[8].surprise"),
    ]
    assert error["field"] == "timers[2].delay_ms"
    assert fake_api.stats()["pending"] == 0
    assert fake_api.client.get("/v1/timers/batch/t0000").status_code == 404


def test_bad_names_in_a_batch_that_decodes_whole_are_each_reported(fake_api: FakeApi) -> None:
    """Names are checked for the whole batch in one call after decoding; when that fails,
    every bad name is still reported by item and field."""
    timers = _timers(8)
    timers[1]["id"] = "two\nlines"  # would pass as two good names in a joined check
    timers[4]["topic"] = "ordérs"
    timers[6]["id"] = "a b"
    r = fake_api.client.post("/v1/timers/batch", json={"timers": timers})
    assert r.status_code == 422, r.text
    problems = r.json()["error"]["problems"]
    assert [(p["index"], p["field"]) for p in problems] == [
        (1, "timers[1].id"),
        (4, "timers[4].topic"),
        (6, "timers[6].id"),
    ]
    assert all("may contain only A-Z a-z 0-9 . _ : -" in p["message"] for p in problems)
    assert fake_api.stats()["pending"] == 0


def test_batch_limits(fake_api_factory) -> None:
    api: FakeApi = fake_api_factory(limits={"max_batch_timers": 5})
    r = api.client.post("/v1/timers/batch", json={"timers": _timers(6)})
    assert r.status_code == 422 and r.json()["error"]["field"] == "timers"
    r = api.client.post("/v1/timers/batch", json={"timers": []})
    assert r.status_code == 422 and r.json()["error"]["field"] == "timers"
    assert api.stats()["pending"] == 0


def test_a_full_size_batch_is_stored(fake_api: FakeApi) -> None:
    r = fake_api.client.post("/v1/timers/batch", json={"timers": _timers(10_000)})
    assert r.status_code == 200 and r.json()["scheduled"] == 10_000
    assert fake_api.stats()["pending"] == 10_000


def test_a_conflict_late_in_a_big_batch_stores_none_of_it(fake_api: FakeApi) -> None:
    """All or nothing holds for a 409 too, however big the batch: the service once wrote
    batches in store calls of 2000 timers, and a conflict at item 2400 left 2000 stored."""
    fake_api.client.post("/v1/timers", json={"topic": "batch", "id": "t2400", "delay_ms": 0})
    flying = fake_api.service.store.due(fake_api.clock.now_ms(), 10)
    assert [t.id for t in flying] == ["t2400"]
    r = fake_api.client.post("/v1/timers/batch", json={"timers": _timers(2500)})
    assert r.status_code == 409, r.text
    error = r.json()["error"]
    assert error["state"] == "in_flight" and error["field"] == "timers[2400]"
    assert error["message"] == "timers[2400]: batch/t2400 is being delivered"
    assert fake_api.stats()["pending"] == 1  # the one in flight, nothing of the batch
    assert fake_api.client.get("/v1/timers/batch/t0000").status_code == 404
    fake_api.service.store.release(flying)


def test_duplicate_identity_in_one_batch_keeps_the_last(fake_api: FakeApi) -> None:
    timers = [
        {"topic": "dup", "id": "x", "delay_ms": 100},
        {"topic": "dup", "id": "x", "delay_ms": 900},
    ]
    assert fake_api.client.post("/v1/timers/batch", json={"timers": timers}).status_code == 200
    assert fake_api.stats()["pending"] == 1
    assert fake_api.client.get("/v1/timers/dup/x").json()["deliver_at_ms"] == T0_MS + 900
