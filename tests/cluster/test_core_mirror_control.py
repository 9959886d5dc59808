"""The topic-log mirror (TIMERSTORE_LOG) and the control data in KV, on a real nats-server."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import msgspec
import nats
import nats.js.errors
import pytest

from bench.cluster_nodes import read_mirror
from cluster.joining import step
from cluster.mirror import LOG_STREAM, PAGE, LogMirror, log_subject, message_headers
from cluster.natsd import NatsCluster
from cluster.store import ClusterStore, open_cluster_store
from storage.errors import StoreOpenError
from storage.protocol import LOG_SINK, LoggedMessage
from tests.cluster.core_helpers import (
    cluster_settings,
    crash,
    rocks_at,
    started_pair,
    timers,
    topic_owned_by,
    wait_for,
)

pytestmark = pytest.mark.cluster
NOW_MS = 1_000_000


@pytest.fixture
def urls(tmp_path: Path) -> Iterator[list[str]]:
    with NatsCluster(tmp_path / "nats", nodes=1) as servers:
        yield servers.urls


def mirrored(store: ClusterStore, topic: str) -> list[int]:
    """The offsets the mirror holds for ``topic``, in stream order (the fault run's reader)."""
    held = read_mirror(store.settings.nats_urls, [topic]).get(topic, [])
    return [offset for offset, _ in held]


def test_the_mirror_holds_each_offset_once_after_a_takeover(
    urls: list[str], tmp_path: Path
) -> None:
    with started_pair(urls, tmp_path) as (n0, n1):
        topic = topic_owned_by([n0, n1], "n0")
        n1.schedule(timers(topic, 8, NOW_MS - 100), NOW_MS)
        due = n0.due(NOW_MS, 100)
        n0.commit_delivered(due[:5], NOW_MS + 1, sink=LOG_SINK)
        wait_for(lambda: mirrored(n1, topic) == [0, 1, 2, 3, 4], "the mirror follows the log")
        n0.commit_delivered(due[5:], NOW_MS + 2, sink=LOG_SINK)
        crash(n0)  # the last three may or may not have reached the mirror
        wait_for(lambda: n1.ownership.owner(n1.partition(topic)) is not None, "n1 took over")
        wait_for(lambda: len(mirrored(n1, topic)) >= 8, "the new owner fills the mirror")
        assert mirrored(n1, topic) == list(range(8))
        payloads = [m.payload for m in n1.read_log(topic, 0, 100)]
        assert payloads == [t.record.payload for t in due]


def test_control_data_is_shared_by_every_node(urls: list[str], tmp_path: Path) -> None:
    with started_pair(urls, tmp_path) as (n0, n1):
        n0.control.put("routes", "orders.eu", b"webhook")
        n0.control.put("routes", "orders.us", b"log")
        n0.control.put("groups", "g1", b"7")
        assert n1.control.get("routes", "orders.eu") == b"webhook"
        assert n1.control.scan("routes") == [("orders.eu", b"webhook"), ("orders.us", b"log")]
        assert n1.control.scan("routes", "orders.u") == [("orders.us", b"log")]
        assert n1.control.delete("routes", "orders.eu") is True
        assert n0.control.delete("routes", "orders.eu") is False
        assert n0.control.get("routes", "orders.eu") is None
        assert n0.control.scan("nothing") == []


def test_a_scan_right_after_a_put_lists_every_name(urls: list[str], tmp_path: Path) -> None:
    """nats-py's ``KeyValue.keys`` came back empty about once in 150 calls right after a
    put (its consumer-info check races the first delivery); with it, these 300 rounds
    failed in two runs of three. ``scan`` lists the bucket stream's subjects instead."""
    with started_pair(urls, tmp_path) as (n0, n1):
        for count in range(300):
            n0.control.put("groups", f"g{count:03d}", b"%d" % count)
            assert n1.control.scan("groups", f"g{count:03d}") == [(f"g{count:03d}", b"%d" % count)]
        assert [name for name, _ in n1.control.scan("groups")] == [f"g{i:03d}" for i in range(300)]


def test_with_the_log_mirror_off_nothing_is_copied_and_the_log_is_the_same(
    urls: list[str], tmp_path: Path
) -> None:
    settings = msgspec.structs.replace(cluster_settings(urls, "n0"), log_mirror=False)
    store = open_cluster_store(settings, rocks_at(tmp_path / "n0"))
    try:
        wait_for(store.caught_up, "n0 owns every partition")
        store.schedule(timers("orders", 4, NOW_MS - 100), NOW_MS)
        due = store.due(NOW_MS, 100)
        assert store.commit_delivered(due, NOW_MS + 1, sink=LOG_SINK) == [0, 1, 2, 3]
        assert [m.id for m in store.read_log("orders", 0, 10)] == ["t0", "t1", "t2", "t3"]
        with pytest.raises(nats.js.errors.NotFoundError):  # not even made
            store.loop.run(store.client.jetstream().stream_info(LOG_STREAM), 30)
    finally:
        store.close()


def test_the_mirror_follows_a_log_longer_than_its_page_in_order(
    urls: list[str], tmp_path: Path
) -> None:
    """More than two pages (``PAGE``, one atomic batch each) delivered in a few commits:
    the mirror reads the log from the store page by page and holds every offset once, in
    order; nothing waits once it has caught up."""
    count = PAGE * 2 + 500
    store = open_cluster_store(cluster_settings(urls, "n0"), rocks_at(tmp_path / "n0"))
    try:
        wait_for(store.caught_up, "n0 owns every partition")
        store.schedule(timers("bulk", count, NOW_MS - 10_000), NOW_MS)
        while due := store.due(NOW_MS, 1_200):
            store.commit_delivered(due, NOW_MS + 1, sink=LOG_SINK)
        wait_for(lambda: len(mirrored(store, "bulk")) >= count, "the mirror caught up", 60)
        assert mirrored(store, "bulk") == list(range(count))
        assert isinstance(store.mirror, LogMirror)
        assert store.mirror.backlog() == 0
    finally:
        store.close()


def test_a_page_holding_a_former_owners_copy_is_sent_from_the_mirrors_last_offset(
    urls: list[str], tmp_path: Path
) -> None:
    """Offsets 5 and 6 reach the stream from elsewhere (as a former owner's late copy
    would) while this owner's mirror ends at 4: its next page (5 to 9) is refused whole
    as a duplicate, and it goes on from the stream's last offset; each offset once, in
    order."""
    store = open_cluster_store(cluster_settings(urls, "n0"), rocks_at(tmp_path / "n0"))
    try:
        wait_for(store.caught_up, "n0 owns every partition")
        store.schedule(timers("late", 10, NOW_MS - 100), NOW_MS)
        due = store.due(NOW_MS, 100)
        store.commit_delivered(due[:5], NOW_MS + 1, sink=LOG_SINK)
        wait_for(lambda: mirrored(store, "late") == [0, 1, 2, 3, 4], "the first five copied")
        js = store.client.jetstream()
        for offset in (5, 6):
            r = due[offset].record
            m = LoggedMessage(offset, due[offset].id, r.payload, {}, False, 0, NOW_MS + 2)
            subject = log_subject("late")
            ack = store.loop.run(js.publish(subject, m.payload, headers=message_headers("late", m)))
            assert not ack.duplicate
        store.commit_delivered(due[5:], NOW_MS + 2, sink=LOG_SINK)
        wait_for(lambda: len(mirrored(store, "late")) >= 10, "the rest copied")
        assert mirrored(store, "late") == list(range(10))
        assert isinstance(store.mirror, LogMirror)
        assert store.mirror.backlog() == 0
    finally:
        store.close()


def test_a_step_jetstream_refuses_is_named_with_its_reason(urls: list[str], tmp_path: Path) -> None:
    """Another stream already takes the mirror's subjects: joining fails at once with the
    step and JetStream's own words (not a bare ``BadRequestError()``), and leaves no
    thread or connection of the node behind."""

    async def take_the_subjects() -> None:
        client = await nats.connect(servers=urls)
        try:
            await client.jetstream().add_stream(name="SOMEONE_ELSE", subjects=["tslog.>"])
        finally:
            await client.close()

    asyncio.run(take_the_subjects())
    threads_before = {t.name for t in threading.enumerate()}
    refused = r"TIMERSTORE_LOG stream: JetStream refused it.*overlap"
    with pytest.raises(StoreOpenError, match=refused):
        open_cluster_store(cluster_settings(urls, "n0"), rocks_at(tmp_path / "n0"))
    left = {t.name for t in threading.enumerate()} - threads_before
    assert not {name for name in left if name.startswith("ts-")}, left


def test_a_stream_jetstream_cannot_place_yet_is_asked_for_again(
    fresh_nats: NatsCluster, caplog
) -> None:
    """JetStream refuses a replicated stream while it sees fewer servers than replicas
    (10005, "no suitable peers for placement"), as while servers started beside the node
    still find one another (a fresh clone's run of 27 Nov had a node exit on it). Joining
    asks again until its wait is over, then names the step and JetStream's words. Here an
    R4 stream on three servers, so the refusal stays; the wait is cut to 1.5 s."""
    caplog.set_level(logging.INFO, logger="cluster.joining")

    async def create_r4() -> None:
        client = await nats.connect(servers=fresh_nats.urls)
        try:
            js = client.jetstream()
            await step("the R4 stream", lambda: js.add_stream(name="R4", num_replicas=4), 1.5)
        finally:
            await client.close()

    with pytest.raises(StoreOpenError, match=r"the R4 stream: JetStream refused it.*placement"):
        asyncio.run(create_r4())
    # logged only when a refusal is to be asked again (one at 0 s, more every 0.5 s)
    assert "the R4 stream: waiting for JetStream's servers" in caplog.text, caplog.text
