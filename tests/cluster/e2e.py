"""Helpers of the end-to-end cluster tests: HTTP calls on the nodes, bounded waits, and the
topic log read back."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import httpx

T = TypeVar("T")
WAIT_S = 90.0  # a loaded 2-core machine; nothing here waits for a fixed time
POLL_S = 0.1


def wait_for(what: str, probe: Callable[[], T | None], timeout_s: float = WAIT_S) -> T:
    """Poll ``probe`` until it returns something other than None or False."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value = probe()
        except httpx.HTTPError:
            value = None  # a node that is restarting or not yet listening
        if value is not None and value is not False:
            return value
        assert time.monotonic() < deadline, f"not within {timeout_s:.0f} s: {what}"
        time.sleep(POLL_S)


def view(url: str) -> dict[str, Any]:
    r = httpx.get(f"{url}/v1/cluster", timeout=10)
    assert r.status_code == 200, r.text
    return dict(r.json())


def owners(url: str) -> dict[int, str | None]:
    return {o["partition"]: o["node_id"] for o in view(url)["owners"]}


def schedule_batch(url: str, timers: list[dict[str, Any]]) -> httpx.Response:
    return httpx.post(f"{url}/v1/timers/batch", json={"timers": timers}, timeout=30)


def read_log(url: str, topic: str) -> list[dict[str, Any]]:
    """Every message of ``topic``'s log from offset 0 (404: no log yet, so none)."""
    messages: list[dict[str, Any]] = []
    while True:
        r = httpx.get(
            f"{url}/v1/topics/{topic}/messages",
            params={"offset": len(messages), "limit": 1000},
            timeout=30,
        )
        if r.status_code == 404:
            return messages
        assert r.status_code == 200, r.text
        page = r.json()["messages"]
        if not page:
            return messages
        messages += page
