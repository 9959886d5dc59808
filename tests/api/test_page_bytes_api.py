"""A listing page ends at ``limits.max_page_bytes`` of payloads and headers, whatever its
``limit``: a page of large payloads stays bounded in the server's memory (a page of 1000
messages of 1 MiB took the server from 0.7 to 4.4 GB of RSS and 21 s), and the cursor or
``next_offset`` goes on from there. A real uvicorn server."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from tests.api.helpers import ThreadServer
from tests.waiting import wait_for

KIB = 1024
PAGE_BYTES = 8 * KIB
COUNT = 10  # of 3 KiB each: pages of 3 (9 KiB reaches 8), 3, 3 and 1


def _schedule(client: httpx.Client, topic: str, delay_ms: int) -> None:
    timers = [
        {"topic": topic, "id": f"m{i}", "delay_ms": delay_ms + i, "payload": "x" * (3 * KIB)}
        for i in range(COUNT)
    ]
    assert client.post("/v1/timers/batch", json={"timers": timers}).status_code == 200


def _cursor_pages(client: httpx.Client, path: str) -> list[list[str]]:
    pages, params = [], {"limit": 1000}
    for _ in range(COUNT + 1):  # bounded: a page holds one item at least
        body = client.get(path, params=params).json()
        pages.append([t["id"] for t in body["timers"]])
        if body["next_cursor"] is None:
            return pages
        params = {"limit": 1000, "cursor": body["next_cursor"]}
    raise AssertionError(f"the cursor never ended: {pages}")


def _split(ids: list[str]) -> list[list[str]]:
    return [ids[0:3], ids[3:6], ids[6:9], ids[9:]]


def test_pages_of_pending_timers_and_messages_end_at_max_page_bytes(
    live_factory: Callable[..., tuple[httpx.Client, ThreadServer]],
) -> None:
    client, _ = live_factory(limits={"max_page_bytes": PAGE_BYTES})
    ids = [f"m{i}" for i in range(COUNT)]
    _schedule(client, "later", 3_600_000)
    assert _cursor_pages(client, "/v1/timers") == _split(ids)

    _schedule(client, "now", 0)
    wait_for(
        lambda: client.get("/v1/topics/now/messages", params={"offset": COUNT - 1}).json()[
            "messages"
        ],
        what="every timer in the topic log",
    )
    pages, offset = [], 0
    for _ in range(COUNT + 1):
        body = client.get("/v1/topics/now/messages", params={"offset": offset, "limit": 1000})
        messages = body.json()["messages"]
        if not messages:
            break
        pages.append([m["id"] for m in messages])
        offset = body.json()["next_offset"]
    assert pages == _split(ids)
