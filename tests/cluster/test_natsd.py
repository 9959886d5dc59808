"""NatsCluster: three real nats-servers form a JetStream cluster and survive losing one."""

from __future__ import annotations

import asyncio
import os

import nats
import pytest
from nats.js.api import StorageType, StreamConfig

from cluster.natsd import NatsCluster
from storage.errors import StoreOpenError

pytestmark = pytest.mark.cluster


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def publish_and_count(urls: list[str], subject: str) -> int:
    """Publish one message to the R3 stream through ``urls`` and return its message count."""
    client = await nats.connect(servers=urls, connect_timeout=5, max_reconnect_attempts=20)
    try:
        js = client.jetstream(timeout=10)
        await js.publish(subject, b"x", stream="T")
        info = await js.stream_info("T")
        return int(info.state.messages)
    finally:
        await client.close()


async def create_stream(urls: list[str]) -> int:
    client = await nats.connect(servers=urls, connect_timeout=5)
    try:
        js = client.jetstream(timeout=10)
        config = StreamConfig(name="T", subjects=["t.>"], num_replicas=3)
        config.storage = StorageType.FILE
        info = await js.add_stream(config)
        return len(info.cluster.replicas or []) + 1 if info.cluster else 1
    finally:
        await client.close()


def test_three_servers_keep_an_r3_stream_writable_with_one_killed(tmp_path) -> None:
    servers = NatsCluster(tmp_path / "nats", nodes=3)
    pids = [servers.pid(i) for i in range(3)]
    try:
        assert len(set(servers.urls)) == 3
        assert asyncio.run(create_stream(servers.urls)) == 3  # a leader and two replicas
        assert asyncio.run(publish_and_count(servers.urls, "t.a")) == 1
        servers.kill(0)
        assert servers.pid(0) is None
        assert asyncio.run(publish_and_count(servers.urls[1:], "t.b")) == 2
        servers.restart(0)
        assert asyncio.run(publish_and_count(servers.urls[:1], "t.c")) == 3
    finally:
        servers.stop()
    assert all(pid is not None and not alive(pid) for pid in pids)


def test_a_server_that_cannot_start_stops_the_others(tmp_path) -> None:
    blocker = tmp_path / "nats" / "nats1"
    blocker.parent.mkdir()
    blocker.write_text("a file where the store directory must go")
    with pytest.raises(StoreOpenError) as caught:
        NatsCluster(tmp_path / "nats", nodes=3)
    assert "nats-server" in str(caught.value)
