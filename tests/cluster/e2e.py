"""Helpers of the end-to-end cluster tests: HTTP calls on the nodes, bounded waits, and the
topic log read back."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import httpx

from cluster.records import partition_of

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


def full_log(url: str, topic: str, count: int) -> list[dict[str, Any]]:
    """``topic``'s log once it holds at least ``count`` messages."""

    def probe() -> list[dict[str, Any]] | None:
        messages = read_log(url, topic)
        return messages if len(messages) >= count else None

    return wait_for(f"{count} messages of {topic} at {url}", probe)


def topics_owned_by(url: str, node_id: str, candidates: list[str], count: int) -> list[str]:
    """``count`` topics among ``candidates`` whose partition ``node_id`` owns, as ``url``
    sees it: waited for, as ownership settles over a few ticks after the nodes join (a
    node owning one partition may not own one of these topics yet)."""

    def probe() -> list[str] | None:
        owned = owners(url)
        found = [t for t in candidates if owned[partition_of(t, len(owned))] == node_id]
        return found[:count] if len(found) >= count else None

    return wait_for(f"{count} topics owned by {node_id}", probe)


def owns_none(url: str, node_id: str) -> bool:
    """``url`` sees every partition owned by a node other than ``node_id``."""
    return all(owner not in (None, node_id) for owner in owners(url).values())


def delivered_once(
    url: str, expected: dict[str, set[str]], due_ms: dict[tuple[str, str], int]
) -> None:
    """Every topic's log, read through ``url``, holds exactly the ``expected`` ids, each
    once, at dense offsets, none delivered before it was due."""
    for topic, ids in expected.items():
        messages = full_log(url, topic, len(ids))
        assert [m["offset"] for m in messages] == list(range(len(messages)))
        assert sorted(m["id"] for m in messages) == sorted(ids), topic
        for m in messages:
            assert m["delivered_at_ms"] >= due_ms[(topic, m["id"])], (topic, m)
