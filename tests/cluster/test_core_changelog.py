"""The changelog on a real nats-server: fenced appends, group commit, restore by replay."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from cluster import effects
from cluster.changelog import STREAM
from cluster.errors import FencedError, PartitionMovedError
from cluster.natsd import NatsCluster
from cluster.partition import OwnedPartition
from cluster.records import FenceOp
from cluster.restore import catch_up, open_local
from storage.errors import NotFoundError, TimerStoreError
from storage.protocol import LOG_SINK, TimerState, TimerView
from tests.cluster.core_helpers import Node, nats_node, rocks_at, state_of, timers

pytestmark = pytest.mark.cluster
WAIT_S = 10.0


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    with NatsCluster(tmp_path / "nats", nodes=1) as servers, nats_node(servers.urls) as node:
        yield node


def owned(node: Node, path: Path, partition: int, writer: tuple[str, int]) -> OwnedPartition:
    store, seq = open_local(rocks_at(path), partition)
    seq = catch_up(node.loop, node.changelog, partition, store, seq)
    lost: list[TimerStoreError] = []
    part = OwnedPartition(
        partition,
        store,
        node.changelog,
        node.loop,
        writer,
        seq,
        lambda p, e: lost.append(e),
        threading.Lock(),
    )
    return part


def records_on(node: Node, partition: int) -> int:
    info = node.loop.run(node.js.stream_info(STREAM, subjects_filter=f"ts.p.{partition}"))
    return int((info.state.subjects or {}).get(f"ts.p.{partition}", 0))


def test_append_with_a_stale_sequence_is_fenced(node: Node) -> None:
    seq = node.loop.run(node.changelog.append(3, b"a", 0, "m1", 5))
    node.loop.run(node.changelog.append(3, b"b", seq, "m2", 5))
    with pytest.raises(FencedError):
        node.loop.run(node.changelog.append(3, b"c", seq, "m3", 5))


def test_an_owner_fenced_by_a_new_one_cannot_append(node: Node, tmp_path: Path) -> None:
    old = owned(node, tmp_path / "old", 1, ("n0", 1))
    old.write(lambda s: effects.schedule(s, timers("a", 2, 5_000), 1_000))
    new = owned(node, tmp_path / "new", 1, ("n1", 2))
    new.append_now(FenceOp("n1", 2))
    with pytest.raises(PartitionMovedError):
        old.write(lambda s: effects.schedule(s, timers("a", 1, 9_000, "late"), 1_000))
    assert isinstance(old.lost, FencedError)
    with pytest.raises(PartitionMovedError):  # and nothing more is taken once lost
        old.write(lambda s: effects.cancel(s, [("a", "t0")]))
    assert new.store.get("a", "t1") is not None and new.store.get("a", "late0") is None
    new.write(lambda s: effects.cancel(s, [("a", "t0")]))
    for part in (old, new):
        part.close()


def test_concurrent_writes_share_one_record(node: Node, tmp_path: Path) -> None:
    part = owned(node, tmp_path / "p", 0, ("n0", 1))
    before = records_on(node, 0)
    hold = threading.Event()
    node.loop.call_soon(hold.wait, WAIT_S)  # the loop is busy: no append can start yet
    writers = [
        threading.Thread(
            target=part.write,
            args=(lambda s, i=i: effects.schedule(s, timers("a", 1, 5_000, f"w{i}"), 1_000),),
        )
        for i in range(20)
    ]
    for writer in writers:
        writer.start()
    for _ in range(1_000):  # every write applied locally, each waiting for its record
        if part.store.stats().pending == 20:
            break
        threading.Event().wait(0.01)
    hold.set()
    for writer in writers:
        writer.join(WAIT_S)
    assert records_on(node, 0) - before == 1
    part.close()


def normalized(view: TimerView | None) -> TimerView | None:
    """A pending timer's requested time is its key time after a replay (docs/cluster-design.md)."""
    if view is None or view.state is not TimerState.PENDING:
        return view
    return msgspec.structs.replace(view, requested_deliver_at_ms=0)


def test_an_empty_dir_replays_to_the_same_state(node: Node, tmp_path: Path) -> None:
    part = owned(node, tmp_path / "owner", 2, ("n0", 1))
    write = part.write
    write(lambda s: effects.schedule(s, timers("a", 12, 1_000) + timers("b", 6, 1_500), 1_000))
    write(lambda s: effects.cancel(s, [("a", "t11"), ("b", "nope")]))
    due = part.store.due(2_000, 100)
    write(lambda s: effects.commit_delivered(s, due[:8], 2_001, LOG_SINK))
    write(lambda s: effects.commit_delivered(s, due[8:10], 2_002, "webhook"))
    write(lambda s: effects.retry_later(s, due[10:13], 2_500, "boom", True))
    write(lambda s: effects.dead_letter(s, due[13:], 2_003, "gave up"))
    write(lambda s: effects.replay_dead_letter(s, due[13].topic, due[13].id, 2_004))
    write(lambda s: effects.schedule(s, timers("a", 2, 100, "late"), 2_005))  # clamped
    again = part.store.due(3_000, 100)
    write(lambda s: effects.commit_delivered(s, again, 3_001, LOG_SINK))
    write(lambda s: effects.purge_dead_letters(s, "b"))
    write(lambda s: effects.schedule(s, timers("b", 3, 9_000, "next"), 3_002))
    idents = [
        (t.topic, t.id) for t in timers("a", 12, 0) + timers("b", 6, 0) + timers("b", 3, 0, "next")
    ]
    idents += [("a", "late0"), ("a", "late1")]
    expected = state_of(part.store, idents, ["a", "b"])
    replica, seq = open_local(rocks_at(tmp_path / "replica"), 2)
    assert seq == 0
    assert catch_up(node.loop, node.changelog, 2, replica, seq) == part.last_seq
    found = state_of(replica, idents, ["a", "b"])
    assert [normalized(v) for v in found[0]] == [normalized(v) for v in expected[0]]  # type: ignore[index]
    assert found[1:] == expected[1:]  # type: ignore[index]
    # t0-t7, then t10 (retried) and late0-1: the deliveries were replayed, offsets and all
    assert [m.offset for m in replica.read_log("a", 0, 100)] == list(range(11))
    replica.close()
    part.close()


def test_a_reopened_dir_replays_only_what_follows_it(node: Node, tmp_path: Path) -> None:
    part = owned(node, tmp_path / "owner", 4, ("n0", 1))
    part.write(lambda s: effects.schedule(s, timers("a", 3, 1_000), 1_000))
    replica, seq = open_local(rocks_at(tmp_path / "replica"), 4)
    seq = catch_up(node.loop, node.changelog, 4, replica, seq)
    replica.close()
    due = part.store.due(2_000, 2)
    part.write(lambda s: effects.commit_delivered(s, due, 2_001, LOG_SINK))
    reopened, at = open_local(rocks_at(tmp_path / "replica"), 4)
    assert at == seq
    catch_up(node.loop, node.changelog, 4, reopened, at)
    assert [m.id for m in reopened.read_log("a", 0, 10)] == ["t0", "t1"]
    assert reopened.stats().pending == 1
    reopened.close()
    part.close()


def test_a_refused_write_leaves_the_dir_trusted(node: Node, tmp_path: Path) -> None:
    part = owned(node, tmp_path / "owner", 5, ("n0", 1))
    part.write(lambda s: effects.schedule(s, timers("a", 2, 1_000), 1_000))
    with pytest.raises(NotFoundError):  # refused: nothing applied, nothing to append
        part.write(lambda s: effects.replay_dead_letter(s, "a", "none", 1_000))
    part.close()
    reopened, seq = open_local(rocks_at(tmp_path / "owner"), 5)
    assert seq == part.last_seq > 0  # kept, not emptied for a rebuild
    assert reopened.stats().pending == 2
    reopened.close()
