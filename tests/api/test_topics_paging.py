"""GET /v1/topics in pages: by name or by most pending, following next_cursor to the end.

The listing used to be every topic in one answer (megabytes with a topic per tenant, on
every dashboard refresh). These tests walk real pages over a real store and compare them
with the listing computed from what was scheduled.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.topics import TopicOverview, topic_page
from tests.api.helpers import FakeApi


def _walk(api: FakeApi, **params: Any) -> tuple[list[list[dict]], list[int]]:
    """Every page of the listing; and each page's total."""
    pages, totals, cursor = [], [], None
    for _ in range(1000):  # bounded: a listing that never ends fails below
        query = {**params, **({"cursor": cursor} if cursor else {})}
        r = api.client.get("/v1/topics", params=query)
        assert r.status_code == 200, r.text
        body = r.json()
        pages.append(body["topics"])
        totals.append(body["total"])
        cursor = body["next_cursor"]
        if cursor is None:
            return pages, totals
    raise AssertionError("next_cursor never became null")


def _schedule(api: FakeApi, pending: dict[str, int]) -> None:
    timers = [
        {"topic": topic, "id": f"i{n}", "delay_ms": 60_000}
        for topic, count in pending.items()
        for n in range(count)
    ]
    r = api.client.post("/v1/timers/batch", json={"timers": timers})
    assert r.status_code == 200, r.text


PENDING = {f"t{i:02d}": (i * 7) % 5 + 1 for i in range(23)}


def test_pages_by_name_cover_every_topic_once_in_order(fake_api: FakeApi) -> None:
    _schedule(fake_api, PENDING)
    pages, totals = _walk(fake_api, limit=5)
    assert [len(p) for p in pages] == [5, 5, 5, 5, 3]
    assert set(totals) == {23}
    listed = [(t["topic"], t["pending"]) for page in pages for t in page]
    assert listed == sorted(PENDING.items())


def test_pages_by_pending_go_from_most_to_least_with_names_breaking_ties(
    fake_api: FakeApi,
) -> None:
    _schedule(fake_api, PENDING)
    pages, _ = _walk(fake_api, order="pending", limit=4)
    listed = [(t["topic"], t["pending"]) for page in pages for t in page]
    assert listed == sorted(PENDING.items(), key=lambda kv: (-kv[1], kv[0]))


def test_the_default_page_is_100_and_says_how_many_there_are(fake_api: FakeApi) -> None:
    _schedule(fake_api, {f"x{i:03d}": 1 for i in range(130)})
    body = fake_api.client.get("/v1/topics").json()
    assert len(body["topics"]) == 100 and body["total"] == 130
    assert body["next_cursor"] is not None
    rest = fake_api.client.get("/v1/topics", params={"cursor": body["next_cursor"]}).json()
    assert [t["topic"] for t in rest["topics"]] == [f"x{i:03d}" for i in range(100, 130)]
    assert rest["next_cursor"] is None


def test_a_cursor_stays_a_position_when_topics_come_and_go(fake_api: FakeApi) -> None:
    _schedule(fake_api, {"a": 1, "c": 1, "e": 1})
    first = fake_api.client.get("/v1/topics", params={"limit": 2}).json()
    assert [t["topic"] for t in first["topics"]] == ["a", "c"]
    _schedule(fake_api, {"b": 1, "d": 1})  # "b" lands before the cursor, "d" after
    rest = fake_api.client.get("/v1/topics", params={"cursor": first["next_cursor"]}).json()
    assert [t["topic"] for t in rest["topics"]] == ["d", "e"]
    assert rest["total"] == 5


def _rows(pending: dict[str, int]) -> list[TopicOverview]:
    return [TopicOverview(t, n, 0, "log", []) for t, n in pending.items()]


@settings(max_examples=200, deadline=None)
@given(
    pending=st.dictionaries(st.text(min_size=1, max_size=4), st.integers(0, 3), max_size=30),
    order=st.sampled_from(["topic", "pending"]),
    limit=st.integers(1, 7),
)
def test_walking_the_pages_lists_each_topic_once_in_order(
    pending: dict[str, int], order: Any, limit: int
) -> None:
    rows, cursor, seen = _rows(pending), None, []
    for _ in range(len(rows) + 2):
        page = topic_page(rows, order, cursor, limit)
        assert len(page.rows) <= limit and page.total == len(rows)
        seen += [(r.topic, r.pending) for r in page.rows]
        cursor = page.next_cursor
        if cursor is None:
            break
    by = (lambda kv: kv[0].encode()) if order == "topic" else (lambda kv: (-kv[1], kv[0].encode()))
    assert seen == sorted(pending.items(), key=by)


def test_stats_list_the_100_topics_with_most_pending_and_count_the_rest(
    fake_api: FakeApi,
) -> None:
    pending = {f"s{i:03d}": 1 + i % 4 for i in range(130)}
    _schedule(fake_api, pending)
    stats = fake_api.stats()
    expected = dict(sorted(sorted(pending.items(), key=lambda kv: (-kv[1], kv[0]))[:100]))
    assert stats["pending_by_topic"] == expected
    assert stats["pending_topics_not_listed"] == 30
    assert stats["pending"] == sum(pending.values())
