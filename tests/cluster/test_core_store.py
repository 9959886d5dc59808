"""ClusterStore on a real nats-server: two nodes in one process, forwarding, takeover."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster.errors import FencedError, PartitionMovedError
from cluster.natsd import NatsCluster
from cluster.records import CancelOp
from cluster.store import ClusterStore
from storage.errors import ConflictError, InvalidInputError, NotFoundError
from storage.protocol import LOG_SINK, CancelOutcome, NewTimer, TimerState
from tests.cluster.core_helpers import crash, started_pair, timers, topic_owned_by, wait_for

pytestmark = pytest.mark.cluster
NOW_MS = 1_000_000


@pytest.fixture
def urls(tmp_path: Path) -> Iterator[list[str]]:
    with NatsCluster(tmp_path / "nats", nodes=1) as servers:
        yield servers.urls


@pytest.fixture
def pair(urls: list[str], tmp_path: Path) -> Iterator[list[ClusterStore]]:
    with started_pair(urls, tmp_path) as stores:
        yield stores


def topics_of_both(stores: list[ClusterStore]) -> tuple[str, str]:
    """A topic owned by n0 and one owned by n1."""
    return topic_owned_by(stores, "n0"), topic_owned_by(stores, "n1")


def test_every_node_answers_the_same(pair: list[ClusterStore]) -> None:
    n0, n1 = pair
    a, b = topics_of_both(pair)
    batch = timers(a, 3, NOW_MS + 60_000) + timers(b, 3, NOW_MS + 60_000)
    results = n0.schedule(batch, NOW_MS)
    assert [(r.topic, r.id) for r in results] == [(t.topic, t.id) for t in batch]
    for topic in (a, b):
        assert n0.get(topic, "t1") == n1.get(topic, "t1") is not None
    assert n1.cancel([(a, "t0"), (b, "t0"), (b, "nope")]) == n0.cancel(
        [(a, "t2"), (b, "t2"), (a, "x")]
    )
    assert [r.outcome for r in n0.cancel([(a, "t0")])] == [CancelOutcome.UNKNOWN]
    assert n0.stats().pending == n1.stats().pending == 2
    assert [t.topic for t in n1.topics()] == sorted([a, b])
    page = n1.list_pending(limit=1)
    rest = n1.list_pending(limit=10, cursor=page.next_cursor)
    assert sorted((t.topic, t.id) for t in page.timers + rest.timers) == sorted(
        [(a, "t1"), (b, "t1")]
    )
    assert rest.next_cursor is None


def test_forwarded_errors_are_the_same_class(pair: list[ClusterStore]) -> None:
    n0, n1 = pair
    a, b = topics_of_both(pair)
    n0.schedule([NewTimer(b, "busy", NOW_MS - 10)], NOW_MS)
    assert [t.id for t in n1.due(NOW_MS, 10)] == ["busy"]  # n1 owns b: now in flight there
    with pytest.raises(ConflictError) as caught:  # item 1 of the caller's batch, via n0
        n0.schedule([NewTimer(a, "fine", NOW_MS + 5), NewTimer(b, "busy", NOW_MS + 5)], NOW_MS)
    assert caught.value.state == TimerState.IN_FLIGHT and caught.value.field == "timers[1]"
    with pytest.raises(NotFoundError):
        n0.replay_dead_letter(b, "none", NOW_MS)
    with pytest.raises(InvalidInputError) as bad:
        n0.list_pending(topic=b, cursor="???")
    assert bad.value.field == "cursor"


def test_a_takeover_does_not_deliver_again(pair: list[ClusterStore]) -> None:
    n0, n1 = pair
    a, _ = topics_of_both(pair)
    n1.schedule(timers(a, 10, NOW_MS - 100), NOW_MS)
    due = n0.due(NOW_MS, 100)
    assert len(due) == 10
    assert n0.commit_delivered(due[:6], NOW_MS + 1, sink=LOG_SINK) == list(range(6))
    crash(n0)  # four in flight, never committed
    wait_for(lambda: n1.ownership.owner(n1.partition(a)) is not None, "n1 took a's partition")
    again = n1.due(NOW_MS + 10, 100)
    assert sorted(t.id for t in again) == sorted(t.id for t in due[6:])
    assert n1.commit_delivered(again, NOW_MS + 11, sink=LOG_SINK) == list(range(6, 10))
    log = n1.read_log(a, 0, 100)
    assert sorted(m.id for m in log) == sorted(f"t{i}" for i in range(10))
    assert n1.cluster_view().owners[n1.partition(a)].epoch >= 2


def test_a_paused_owner_cannot_append_or_deliver(pair: list[ClusterStore]) -> None:
    n0, n1 = pair
    a, _ = topics_of_both(pair)
    partition = n0.partition(a)
    n0.schedule(timers(a, 3, NOW_MS - 100), NOW_MS)
    stale = n0.ownership.owned[partition]
    n0.loop.run(_pause_balance(n0), 10)  # it renews nothing from here on
    wait_for(lambda: n1.ownership.owner(partition) is not None, "n1 took the partition")
    assert n0.due(NOW_MS, 100) == []  # its lease ran out on its own clock
    with pytest.raises(PartitionMovedError):
        stale.write(lambda s: (None, CancelOp([(a, "t0")])))
    assert isinstance(stale.lost, FencedError)  # JetStream refused it, not its clock
    view = n1.get(a, "t0")
    assert view is not None and view.state == TimerState.PENDING


async def _pause_balance(store: ClusterStore) -> None:
    task = store.ownership._task
    assert task is not None
    task.cancel()


def test_work_asked_for_after_close_is_dropped_quietly(pair: list[ClusterStore]) -> None:
    n0, _ = pair
    n0.close()
    ran: list[bool] = []
    late = n0.ownership  # a late tick's restore or snapshot
    late._submit(late.restorer, lambda: ran.append(True))
    assert ran == []


def test_a_group_conflicting_in_one_partition_stores_the_others_once(
    pair: list[ClusterStore],
) -> None:
    """Independent single schedules committed as a group (``schedule_each``): the timers
    of the partitions without the conflict are stored once, not a second time on a retry
    one by one (which answered ``replaced``, or 409 once they were due)."""
    n0, n1 = pair
    a, b = topics_of_both(pair)
    n0.schedule([NewTimer(b, "busy", NOW_MS - 10)], NOW_MS)
    assert [t.id for t in n1.due(NOW_MS, 10)] == ["busy"]  # in flight at n1
    group = [
        NewTimer(a, "x", NOW_MS + 60_000),
        NewTimer(b, "busy", NOW_MS + 5),
        NewTimer(b, "y", NOW_MS + 60_000),
        NewTimer("", "bad-topic", NOW_MS + 60_000),
    ]
    outcomes = n0.schedule_each(group, NOW_MS)
    assert isinstance(outcomes[1], ConflictError)
    assert isinstance(outcomes[3], InvalidInputError)
    stored = [outcomes[0], outcomes[2]]
    assert [(r.topic, r.id, r.replaced) for r in stored] == [(a, "x", False), (b, "y", False)]  # type: ignore[union-attr]
