"""Both stores: a listing page ends once its payloads and headers reach ``max_bytes``
(the item that reaches it is the last; one item at least), and the cursor or the next
offset goes on from there, so the pages together hold every item once, in order."""

from __future__ import annotations

from collections.abc import Callable

from storage.protocol import LOG_SINK, NewTimer, TimerPage, TimerStore
from tests.conformance.conftest import NOW, WHEEL_PRECISION_MS, ready_ms

KIB = 1024
# payload sizes in KiB, in due-time order; with a budget of 10 KiB the pages are
# [1, 2, 3, 4] (10 reached), [8, 2] (10), [20] (one item over the budget), [1, 1]
SIZES_KIB = [1, 2, 3, 4, 8, 2, 20, 1, 1]
PAGES_KIB = [[1, 2, 3, 4], [8, 2], [20], [1, 1]]
BUDGET = 10 * KIB
STEP_MS = WHEEL_PRECISION_MS  # a wheel slot each: the wheel hands a slot out newest first
LAST_MS = NOW + 100 + STEP_MS * len(SIZES_KIB)


def _schedule(store: TimerStore, topic: str) -> list[str]:
    timers = [
        NewTimer(topic, f"m{i}", NOW + 100 + STEP_MS * i, b"x" * (size * KIB))
        for i, size in enumerate(SIZES_KIB)
    ]
    store.schedule(timers, NOW)
    return [t.id for t in timers]


def _kib(sizes: list[int]) -> list[int]:
    return [size // KIB for size in sizes]


def _pages(read: Callable[[str | None], TimerPage]) -> list[list[int]]:
    pages, cursor = [], None
    for _ in range(len(SIZES_KIB) + 1):  # bounded: one page per item at the most
        page = read(cursor)
        pages.append(_kib([len(v.payload or b"") for v in page.timers]))
        cursor = page.next_cursor
        if cursor is None:
            return pages
    raise AssertionError(f"the cursor never ended: {pages}")


def test_pending_pages_end_at_the_byte_budget(store: TimerStore) -> None:
    _schedule(store, "big")
    pages = _pages(lambda c: store.list_pending(limit=100, cursor=c, max_bytes=BUDGET))
    assert pages == PAGES_KIB
    # without a budget, limit alone bounds the page
    assert len(store.list_pending(limit=100).timers) == len(SIZES_KIB)
    assert _kib([len(v.payload or b"") for v in store.list_pending(limit=3).timers]) == [1, 2, 3]


def test_log_pages_end_at_the_byte_budget(store: TimerStore) -> None:
    ids = _schedule(store, "big")
    due = store.due(ready_ms(store, LAST_MS), 100)
    assert [t.id for t in due] == ids
    store.commit_delivered(due, LAST_MS + STEP_MS, sink=LOG_SINK)
    pages, offset = [], 0
    for _ in range(len(SIZES_KIB) + 1):
        page = store.read_log("big", offset, 100, BUDGET)
        if not page:
            break
        assert page[0].offset == offset  # nothing skipped, nothing read twice
        pages.append(_kib([len(m.payload) for m in page]))
        offset = page[-1].offset + 1
    assert pages == PAGES_KIB
    # an offset inside a commit's page, a budget and a limit together
    assert [m.id for m in store.read_log("big", 5, 1, BUDGET)] == ["m5"]
    assert [m.id for m in store.read_log("big", 5, 100, BUDGET)] == ["m5", "m6"]
    assert len(store.read_log("big", 0, 100)) == len(SIZES_KIB)


def test_dead_letter_pages_end_at_the_byte_budget(store: TimerStore) -> None:
    _schedule(store, "big")
    due = store.due(ready_ms(store, LAST_MS), 100)
    store.dead_letter(due, LAST_MS + STEP_MS, "the sink is down")
    # dead letters are in id order: m0..m8 is the due-time order too
    pages = _pages(lambda c: store.dead_letters(limit=100, after=c, max_bytes=BUDGET))
    assert pages == PAGES_KIB


def test_headers_count_towards_the_budget(store: TimerStore) -> None:
    headers = {"h": "v" * (6 * KIB)}
    store.schedule(
        [NewTimer("hdr", f"h{i}", NOW + 100 + i, b"p" * KIB, headers) for i in range(3)], NOW
    )
    page = store.list_pending(limit=100, max_bytes=BUDGET)
    assert [v.id for v in page.timers] == ["h0", "h1"]  # 7 KiB each: the second reaches 10
    assert page.next_cursor is not None
