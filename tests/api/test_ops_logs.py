"""No credential of a route's URL reaches the log, in either format.

The routes are set through the API of a real service (real RocksDB); the log is what
``configure_logging`` writes, as under ``timerstore serve``. A route's URL is logged when
it changes (``route_changed``), and a Redis URL's password or a webhook's query token
was written there verbatim.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable

import pytest

from app.logs import configure_logging
from tests.api.helpers import FakeApi

REDIS_PASSWORD = "redis-Pa55word"
HOOK_TOKEN = "hook-t0ken"
ROUTES = {
    "jobs": {
        "sink": "redis_stream",
        "url": f"redis://:{REDIS_PASSWORD}@127.0.0.1:6379/0",
        "stream": "jobs-due",
    },
    "orders": {
        "sink": "webhook",
        "url": f"http://127.0.0.1:9/timeouts?token={HOOK_TOKEN}&v=2",
        "secret": "hmac-secret",
    },
}


@pytest.mark.parametrize("log_format", ["json", "text"])
def test_route_urls_are_logged_without_their_credentials(
    restore_logging: None, fake_api_factory: Callable[..., FakeApi], log_format: str
) -> None:
    api = fake_api_factory()
    out = io.StringIO()
    configure_logging(log_format, "info", out)
    for topic, route in ROUTES.items():
        r = api.client.put(f"/v1/topics/{topic}/route", json=route)
        assert r.status_code == 200, r.text
    text = out.getvalue()
    changed = [line for line in text.splitlines() if "route of" in line]
    assert len(changed) == 2, text
    assert REDIS_PASSWORD not in text and HOOK_TOKEN not in text, text
    assert "hmac-secret" not in text
    # what an operator needs is still there: the sink and where it points
    assert "redis://:***@127.0.0.1:6379/0" in changed[0], changed[0]
    assert "http://127.0.0.1:9/timeouts?***" in changed[1], changed[1]
    if log_format == "json":
        events = [json.loads(line) for line in changed]
        assert [(e["event"], e["topic"]) for e in events] == [
            ("route_changed", "jobs"),
            ("route_changed", "orders"),
        ]
