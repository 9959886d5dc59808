"""A path that leaves a name empty (``/v1/timers/orders/``, ``/v1/timers//o1``, an empty
topic or group in the topic, group, route and dead-letter paths) is a 422 naming the
field and the route, not a bare "Not Found"; never a 5xx, and nothing stored changes.
A real uvicorn server, so the paths reach it as a client sends them."""

from __future__ import annotations

import httpx
import pytest

from api.schemas import NAME_DESCRIPTION

COMMIT = "/v1/topics/{topic}/groups/{group}/commit"
EMPTY_NAMES = [
    ("GET", "/v1/timers/orders/", "id", "/v1/timers/{topic}/{id}"),
    ("DELETE", "/v1/timers/orders/", "id", "/v1/timers/{topic}/{id}"),
    ("GET", "/v1/timers//o1", "topic", "/v1/timers/{topic}/{id}"),
    ("DELETE", "/v1/timers//o1", "topic", "/v1/timers/{topic}/{id}"),
    ("POST", "/v1/deadletters/orders//replay", "id", "/v1/deadletters/{topic}/{id}/replay"),
    ("POST", "/v1/deadletters//o1/replay", "topic", "/v1/deadletters/{topic}/{id}/replay"),
    ("POST", "/v1/deadletters//replay", "topic", "/v1/deadletters/{topic}/replay"),
    ("GET", "/v1/topics//messages", "topic", "/v1/topics/{topic}/messages"),
    ("GET", "/v1/topics//groups", "topic", "/v1/topics/{topic}/groups"),
    ("POST", "/v1/topics/orders/groups//commit", "group", COMMIT),
    ("GET", "/v1/topics//route", "topic", "/v1/topics/{topic}/route"),
    ("PUT", "/v1/topics//route", "topic", "/v1/topics/{topic}/route"),
    ("DELETE", "/v1/topics//route", "topic", "/v1/topics/{topic}/route"),
]  # fmt: skip


@pytest.fixture
def stored(live: httpx.Client) -> httpx.Client:
    r = live.post("/v1/timers", json={"topic": "orders", "id": "o1", "delay_ms": 3_600_000})
    assert r.status_code == 201, r.text
    return live


@pytest.mark.parametrize(
    ("method", "path", "field", "route"), EMPTY_NAMES, ids=[f"{m} {p}" for m, p, *_ in EMPTY_NAMES]
)
def test_an_empty_name_in_a_path_is_a_422_naming_the_field(
    stored: httpx.Client, method: str, path: str, field: str, route: str
) -> None:
    body = {"offset": 0} if path.endswith("/commit") else {"sink": "log"}
    r = stored.request(method, path, json=body if method in ("POST", "PUT") else None)
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert (error["code"], error["field"]) == ("invalid", field), error
    assert error["message"] == f"{field}: must not be empty in {route} ({NAME_DESCRIPTION})"
    assert stored.get("/v1/timers/orders/o1").json()["state"] == "pending"  # nothing changed


def test_every_empty_name_of_a_path_is_listed(live: httpx.Client) -> None:
    error = live.get("/v1/timers//").json()["error"]
    assert error["field"] == "topic"
    assert [p["field"] for p in error["problems"]] == ["topic", "id"]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/timers/"),  # a trailing slash on a path without names stays a 404
        ("GET", "/v1/timers/orders/o1/"),
        ("GET", "/v1//timers/orders/o1"),
        ("GET", "/v1/nothing/"),
    ],
)
def test_other_unknown_paths_stay_404(live: httpx.Client, method: str, path: str) -> None:
    r = live.request(method, path)
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found", r.text


@pytest.mark.parametrize(
    ("method", "path", "full_path"),
    [
        ("PUT", "/v1/timers/orders/", "/v1/timers/orders/o1"),
        ("HEAD", "/v1/timers//o1", "/v1/timers/orders/o1"),
        ("GET", "/v1/deadletters//replay", "/v1/deadletters/orders/replay"),
        ("POST", "/v1/topics//route", "/v1/topics/orders/route"),
    ],
)
def test_a_method_the_route_does_not_take_is_the_405_of_the_full_path(
    stored: httpx.Client, method: str, path: str, full_path: str
) -> None:
    """The method is checked before the names, as on the full path: 405 with its Allow."""
    full = stored.request(method, full_path)
    r = stored.request(method, path)
    assert full.status_code == r.status_code == 405, r.text
    assert r.headers["allow"] == full.headers["allow"]
    if method != "HEAD":
        assert r.json()["error"]["code"] == "method_not_allowed"
    assert stored.get("/v1/timers/orders/o1").json()["state"] == "pending"  # nothing changed
