"""PUT/GET/DELETE /v1/topics/{topic}/route: validation, secrecy, admin guard, durability."""

from __future__ import annotations

import logging
import signal

import httpx
import pytest

from tests.api.helpers import ServerProcess

WEBHOOK = {
    "sink": "webhook",
    "url": "http://127.0.0.1:9/hook",
    "secret": "s3cr3t-value",
    "timeout_ms": 2000,
    "max_attempts": 3,
}
REDIS = {"sink": "redis_stream", "url": "redis://127.0.0.1:6390/0", "stream": "due", "maxlen": 50}


def test_a_topic_without_a_route_is_a_404_that_names_the_log(fake_api):
    for r in (
        fake_api.client.get("/v1/topics/orders/route"),
        fake_api.client.delete("/v1/topics/orders/route"),
    ):
        assert r.status_code == 404
        assert "embedded log" in r.json()["error"]["message"]


def test_put_get_delete_webhook_never_echoes_the_secret(fake_api):
    c = fake_api.client
    r = c.put("/v1/topics/orders/route", json=WEBHOOK)
    assert r.status_code == 200, r.text
    body = r.json()
    assert "secret" not in body and "s3cr3t-value" not in r.text
    assert body == {
        "topic": "orders", "sink": "webhook", "url": WEBHOOK["url"], "timeout_ms": 2000,
        "max_attempts": 3, "secret_set": True,
    }  # fmt: skip
    got = c.get("/v1/topics/orders/route")
    assert got.json() == body and "s3cr3t-value" not in got.text
    assert c.delete("/v1/topics/orders/route").json() == {"topic": "orders", "sink": "log"}
    assert c.get("/v1/topics/orders/route").status_code == 404  # back to the log


def test_redis_route_gets_defaults(fake_api):
    r = fake_api.client.put("/v1/topics/jobs/route", json={**REDIS, "maxlen": None})
    assert r.status_code == 200, r.text
    assert r.json()["maxlen"] == 1_000_000 and r.json()["max_attempts"] == 5


BAD_ROUTES = [
    ({"sink": "kafka"}, "sink"),
    ({"url": "http://127.0.0.1/x"}, "sink"),
    ({**WEBHOOK, "url": "ftp://example.com/x"}, "url"),
    ({**WEBHOOK, "url": "redis://127.0.0.1/0"}, "url"),
    ({**WEBHOOK, "url": "http:///nohost"}, "url"),
    ({**REDIS, "url": "http://127.0.0.1:6379"}, "url"),
    ({**REDIS, "url": "redis://127.0.0.1:6379/not-a-db"}, "url"),
    ({**WEBHOOK, "url": "http://127.0.0.1:99999/x"}, "url"),
    ({**WEBHOOK, "url": "http://127.0.0.1:65536/x"}, "url"),
    ({**WEBHOOK, "url": "http://127.0.0.1/x\n"}, "url"),
    ({**WEBHOOK, "url": "http://127.0.0.1/a b"}, "url"),
    ({k: v for k, v in WEBHOOK.items() if k != "url"}, "url"),
    ({**WEBHOOK, "timeout_ms": 0}, "timeout_ms"),
    ({**WEBHOOK, "timeout_ms": 60_001}, "timeout_ms"),
    ({**WEBHOOK, "timeout_ms": "fast"}, "timeout_ms"),
    ({k: v for k, v in WEBHOOK.items() if k != "secret"}, "secret"),
    ({**WEBHOOK, "secret": ""}, "secret"),
    ({**WEBHOOK, "max_attempts": 0}, "max_attempts"),
    ({**WEBHOOK, "stream": "x"}, "stream"),
    ({**REDIS, "stream": ""}, "stream"),
    ({**REDIS, "maxlen": 0}, "maxlen"),
    ({**REDIS, "secret": "x"}, "secret"),
    ({"sink": "log", "url": "http://x"}, "url"),
    ({**WEBHOOK, "colour": "red"}, "colour"),
]


@pytest.mark.parametrize(("route", "field"), BAD_ROUTES)
def test_bad_route_is_422_naming_the_field_and_changes_nothing(fake_api, route, field):
    c = fake_api.client
    assert c.put("/v1/topics/orders/route", json=REDIS).status_code == 200
    r = c.put("/v1/topics/orders/route", json=route)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == field, r.text
    assert c.get("/v1/topics/orders/route").json()["stream"] == "due"


@pytest.mark.parametrize(
    ("body", "status"),
    [(b"{not json", 422), (b"[]", 422), (b"", 422)],
)
def test_malformed_bodies_are_4xx(fake_api, body, status):
    r = fake_api.client.put(
        "/v1/topics/orders/route", content=body, headers={"content-type": "application/json"}
    )
    assert r.status_code == status, r.text


def test_bad_topic_name_is_422(fake_api):
    r = fake_api.client.put("/v1/topics/bad topic!/route", json={"sink": "log"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "topic"


def test_routes_are_admin_guarded(fake_api_factory):
    api = fake_api_factory(api_keys=["user"], admin_keys=["root"])
    c = api.client
    user = {"Authorization": "Bearer user"}
    root = {"Authorization": "Bearer root"}
    assert c.put("/v1/topics/t/route", json=WEBHOOK, headers=user).status_code == 401
    assert c.get("/v1/topics/t/route", headers=user).status_code == 401
    assert c.put("/v1/topics/t/route", json=WEBHOOK, headers=root).status_code == 200
    assert c.get("/v1/topics/t/route", headers=root).json()["sink"] == "webhook"


@pytest.mark.slow
@pytest.mark.parametrize("store", ["rocks", "wheel"])
def test_routes_survive_sigkill(tmp_path, store):
    data = tmp_path / "data"
    env = {"TIMERSTORE_STORE": store}
    server = ServerProcess(data, env)
    try:
        url = server.start()
        assert httpx.put(url + "/v1/topics/a/route", json=WEBHOOK).status_code == 200
        assert httpx.put(url + "/v1/topics/b/route", json=REDIS).status_code == 200
        assert httpx.put(url + "/v1/topics/c/route", json=REDIS).status_code == 200
        assert httpx.delete(url + "/v1/topics/c/route").status_code == 200
        server.signal(signal.SIGKILL)
        server.wait()
        url = server.start()
        assert httpx.get(url + "/v1/topics/a/route").json()["url"] == WEBHOOK["url"]
        assert httpx.get(url + "/v1/topics/b/route").json()["stream"] == "due"
        assert httpx.get(url + "/v1/topics/c/route").status_code == 404  # the log again
    finally:
        server.kill()


def test_a_route_set_over_rest_delivers_to_a_real_receiver(live_factory):
    from tests.sinks.receiver import Receiver
    from tests.sinks.sink_settings import LOADED_MACHINE_TIMEOUT_MS
    from tests.waiting import wait_for

    receiver = Receiver("rest-secret")
    url = receiver.start()
    try:
        live, _ = live_factory()
        route = {"sink": "webhook", "url": url, "secret": "rest-secret", "max_attempts": 2}
        route["timeout_ms"] = LOADED_MACHINE_TIMEOUT_MS  # one arrival, even on a stalled CI
        assert live.put("/v1/topics/hooked/route", json=route).status_code == 200
        r = live.post(
            "/v1/timers", json={"topic": "hooked", "id": "x1", "payload": "hi", "delay_ms": 0}
        )
        assert r.status_code == 201, r.text
        wait_for(lambda: live.get("/v1/timers/hooked/x1").json()["state"] == "delivered")
        timer = live.get("/v1/timers/hooked/x1").json()
        assert timer["sink"] == "webhook" and timer["attempts"] == 1
        assert [(a.body["id"], a.body["payload"], a.signed) for a in receiver.arrivals] == [
            ("x1", "hi", True)
        ]
        assert live.get("/v1/stats").json()["delivered_by_sink"] == {"webhook": 1}
    finally:
        receiver.stop()


def test_route_changes_are_logged_without_the_secret(fake_api, caplog):
    with caplog.at_level(logging.INFO, logger="app.topic_service"):
        assert fake_api.client.put("/v1/topics/orders/route", json=WEBHOOK).status_code == 200
        assert fake_api.client.delete("/v1/topics/orders/route").status_code == 200
    changes = [r for r in caplog.records if getattr(r, "event", None) == "route_changed"]
    assert [(r.topic, r.sink) for r in changes] == [("orders", "webhook"), ("orders", "log")]
    assert WEBHOOK["secret"] not in caplog.text


@pytest.mark.parametrize(
    ("route", "rule"),
    [
        ({**WEBHOOK, "url": "http://[::1"}, "webhook's form"),
        ({**WEBHOOK, "url": "http://[::1]:8080/hook"}, "webhook's form"),
        ({**WEBHOOK, "url": "ftp://[x"}, "scheme must be http or https"),
        ({**REDIS, "url": "redis://[x"}, "redis_stream's form"),
        ({**REDIS, "url": "redis://user@[x/0"}, "redis_stream's form"),
    ],
)
def test_a_url_with_a_bracket_is_422_naming_url_on_a_real_server(live, route, rule):
    assert live.put("/v1/topics/orders/route", json=REDIS).status_code == 200
    r = live.put("/v1/topics/orders/route", json=route)
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["field"] == "url" and rule in error["message"], error
    assert live.get("/v1/topics/orders/route").json()["stream"] == "due"  # nothing changed
