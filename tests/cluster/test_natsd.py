"""NatsCluster: three real nats-servers form a JetStream cluster and survive losing one."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from pathlib import Path

import nats
import pytest
from nats.js.api import StorageType, StreamConfig
from nats.js.errors import NoStreamResponseError

from cluster import natsd
from cluster.natsd import NatsCluster
from storage.errors import StoreOpenError

pytestmark = pytest.mark.cluster


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


ELECTION_WAIT_S = 60.0  # a killed server's stream leadership moves in a Raft election (4-9 s)
NOT_YET = (nats.errors.NoRespondersError, nats.errors.TimeoutError, NoStreamResponseError)


async def publish_and_count(urls: list[str], subject: str) -> int:
    """Publish one message to the R3 stream through ``urls`` and return its message count.

    While the stream elects a new leader there is no responder: the publish is sent again
    (the same ``Nats-Msg-Id``, so a retry that did land is not counted twice) until
    ``ELECTION_WAIT_S`` has passed."""
    client = await nats.connect(servers=urls, connect_timeout=5, max_reconnect_attempts=20)
    deadline = time.monotonic() + ELECTION_WAIT_S
    try:
        js = client.jetstream(timeout=5)
        while True:
            try:
                await js.publish(subject, b"x", stream="T", headers={"Nats-Msg-Id": subject})
                info = await js.stream_info("T")
                return int(info.state.messages)
            except NOT_YET:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)
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


def test_a_port_taken_between_its_pick_and_the_bind_gets_new_ports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race another process can win: the first pick is a port that is in use by the
    time the server binds it; the server exits, and the cluster starts again on new ports."""
    real_free_port = natsd.free_port
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        picks = iter([taken.getsockname()[1]])
        monkeypatch.setattr(natsd, "free_port", lambda: next(picks, None) or real_free_port())
        with NatsCluster(tmp_path / "nats", nodes=1) as servers:
            assert servers.ports[0].client != taken.getsockname()[1]
            assert servers.pid(0) is not None
