"""The three peers against their real servers, at a tiny size: delivery, cancel truth,
recovery after SIGKILL, and that every server a system starts is stopped by it.

Each test starts its own redis-server / postgres / nats-server on free loopback ports
in tmp_path (xdist-safe) and stops it in ``finally``; counts are asserted, never times.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest

from bench.measure import now_ms
from bench.scenarios import recovery_peer
from bench.scenarios.common import Context
from bench.sizes import TINY
from bench.systems import BenchTimer, Skip, SystemSpec, select_specs
from bench.systems.jetstream import STREAM, stream_config
from bench.systems.peer import PeerSystem
from bench.systems.redis_zset import BATCH as POLL_BATCH
from tests.waiting import wait_for

PEERS = ["nats-r1", "redis-everysec", "redis-always", "postgres"]
SLOW_PEERS = ["nats-r3"]  # three nodes and a raft election per start
WAIT_S = 60.0


def spec_of(name: str) -> SystemSpec:
    (spec,) = select_specs([name])
    return spec


def open_peer(name: str, workdir: Path) -> PeerSystem:
    try:
        system = spec_of(name).open(str(workdir), simulated=False, record_ids=True)
    except Skip as exc:  # a server binary missing: say which (fail under CI)
        if os.environ.get("CI"):
            pytest.fail(str(exc))
        pytest.skip(str(exc))
    assert isinstance(system, PeerSystem)
    return system


PARAMS = [*PEERS, *(pytest.param(n, marks=pytest.mark.slow) for n in SLOW_PEERS)]


@pytest.fixture(params=PARAMS)
def peer(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[PeerSystem]:
    system = open_peer(request.param, tmp_path / request.param)
    try:
        yield system
    finally:
        system.close()


def batch(prefix: str, n: int, due_ms: int) -> list[BenchTimer]:
    return [BenchTimer(f"{prefix}{i}", due_ms, b"x" * 100) for i in range(n)]


def test_every_timer_is_delivered_once_and_none_early(peer: PeerSystem) -> None:
    t = now_ms()
    peer.schedule(batch("d", 300, t + 300), t)
    assert peer.pending() == 300
    peer.start()
    wait_for(lambda: peer.delivered() >= 300, WAIT_S, "peer.delivered() >= 300")
    assert peer.delivered_ids() == {f"d{i}" for i in range(300)}
    assert peer.lateness()["early"] == 0
    wait_for(lambda: peer.pending() == 0, WAIT_S, "peer.pending() == 0")
    assert peer.delivered() == 300  # nothing twice


def test_cancel_tells_the_truth_before_and_after_delivery(peer: PeerSystem) -> None:
    """What the report claims: a pending timer's cancel removes it (and it never comes);
    a delivered one's cancel says nothing was removed; an unknown id neither."""
    t = now_ms()
    peer.schedule(batch("c", 100, t + 2000), t)
    assert peer.cancel([f"c{i}" for i in range(0, 100, 2)] + ["never-scheduled"]) == 50
    peer.start()
    wait_for(lambda: peer.delivered() >= 50, WAIT_S, "peer.delivered() >= 50")
    kept = {f"c{i}" for i in range(1, 100, 2)}
    wait_for(lambda: peer.pending() == 0, WAIT_S, "peer.pending() == 0")
    assert peer.delivered_ids() == kept
    assert peer.cancel(sorted(kept)) == 0


@pytest.mark.parametrize("name", PARAMS)
def test_recovery_after_sigkill_loses_no_acknowledged_timer(name: str, tmp_path: Path) -> None:
    """The recovery scenario's figures on a real server: the server is SIGKILLed with
    timers pending and delivering, restarted on its data, and audited by id."""
    open_peer(name, tmp_path / "probe").close()  # skips when the server is missing
    ctx = Context(TINY, str(tmp_path / "recovery"))
    figures = recovery_peer.run(spec_of(name), ctx)
    assert figures["acked"] == TINY.recovery_pending
    assert figures["lost_not_due"] == 0
    if name.startswith("nats"):  # fired into the stream: nothing taken by a client
        assert figures["lost"] == 0
    else:  # at most the take whose reply died with the server (the report says so)
        assert figures["lost"] <= POLL_BATCH
    assert figures["delivered_twice"] == 0
    assert 0 < figures["pending_at_reopen"] <= figures["acked"]  # the cold ones, at least
    assert figures["first_delivery_s"] is not None
    for system in ctx.opened:
        assert isinstance(system, PeerSystem)
        assert system.server_rss_bytes() == 0  # closed: its server is gone


def test_a_killed_server_is_down_and_comes_back_with_its_timers(peer: PeerSystem) -> None:
    t = now_ms()
    peer.schedule(batch("k", 50, t + 3_600_000), t)
    peer.kill_server()
    assert peer.server_rss_bytes() == 0
    peer.restart_server()
    assert peer.pending_ids() == {f"k{i}" for i in range(50)}


def test_the_jetstream_reader_reads_on_when_its_consumer_is_gone(tmp_path: Path) -> None:
    """A reader whose consumer vanished (deleted here; after a restart of the servers a
    suite run saw one read nothing more) makes another and reads what fired since."""
    import asyncio

    import nats

    system = open_peer("nats-r1", tmp_path / "js")
    try:
        system.start()
        t = now_ms()
        system.schedule([BenchTimer("a", t, b"x")], t)
        wait_for(lambda: system.delivered() == 1, WAIT_S, "the first fired timer read")

        async def delete_consumers() -> int:
            nc = await nats.connect(system.servers.urls)  # type: ignore[attr-defined]
            try:
                js = nc.jetstream()
                infos = await js.consumers_info("TIMERS")
                for info in infos:
                    await js.delete_consumer("TIMERS", info.name)
                return len(infos)
            finally:
                await nc.close()

        assert asyncio.run(delete_consumers()) == 1
        t = now_ms()
        system.schedule([BenchTimer("b", t, b"x")], t)
        wait_for(lambda: system.delivered() == 2, WAIT_S, "the second fired timer read")
        assert system.delivered_ids() == {"a", "b"}
    finally:
        system.close()


def test_jetstream_publishes_that_reach_no_stream_are_sent_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A publish answered "no responders" stored nothing (the stream was electing its
    leader in a suite run; here it is gone): it is sent again until the stream is back."""
    system = open_peer("nats-r1", tmp_path / "js")
    urls = system.servers.urls  # type: ignore[attr-defined]

    async def on_stream(delete: bool) -> None:
        nc = await nats.connect(urls)
        try:
            js = nc.jetstream()
            if delete:
                await js.delete_stream(STREAM)
            else:
                await js.add_stream(stream_config(replicas=1))
        finally:
            await nc.close()

    try:
        asyncio.run(on_stream(delete=True))
        t = now_ms()
        sent = threading.Thread(target=system.schedule, args=(batch("n", 20, t + 3_600_000), t))
        with caplog.at_level("WARNING", logger="bench.systems.jetstream"):
            sent.start()
            wait_for(lambda: "reached no stream" in caplog.text, WAIT_S, "a publish refused")
            asyncio.run(on_stream(delete=False))
            sent.join(WAIT_S)
        assert not sent.is_alive()
        assert system.pending_ids() == {f"n{i}" for i in range(20)}
    finally:
        system.close()


def test_close_stops_the_server_even_when_the_system_fails(tmp_path: Path) -> None:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is missing: `make test` installs it")
    system = open_peer("redis-everysec", tmp_path / "r")
    process = system.server.process  # type: ignore[attr-defined]
    assert process is not None and process.poll() is None
    with pytest.raises(AttributeError):
        system.schedule([("not", "a", "timer")], now_ms())  # type: ignore[list-item]
    system.close()
    assert process.poll() is not None


@pytest.mark.slow
def test_the_report_puts_the_peers_beside_the_store(tmp_path: Path) -> None:
    """`timerstore bench` with peers: the feature table, durability on every row, the
    peer targets judged, and a row (never a gap) for what a peer cannot do."""
    import argparse
    import json

    from bench import cli

    for name in ("redis-server",):
        if shutil.which(name) is None:
            pytest.skip(f"{name} is missing: `make test` installs it")
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers())
    stores = "rocks,redis-everysec,postgres,nats-r1"
    argv = ["bench", "--tiny", "--quiet", "--stores", stores, "--out", str(tmp_path)]
    argv += ["--scenario", "enqueue,burst,cancel,long_delays"]
    args = parser.parse_args(argv)
    assert args.handler(args) == 0
    (run_dir,) = tmp_path.iterdir()
    results = json.loads((run_dir / "results.json").read_text())
    for name in stores.split(",")[1:]:
        assert results["scenarios"]["long_delays"]["systems"][name]["status"] == "skipped"
        cancel = results["scenarios"]["cancel"]["systems"][name]
        assert cancel["status"] == "ok", cancel.get("traceback")
        assert cancel["figures"]["late_cancel_removed"] == 0
        assert results["scenarios"]["burst"]["systems"][name]["figures"]["never_delivered"] == 0
    names = {t["name"]: t for t in results["peer_targets"]}
    assert set(names) == {"peers_burst_p99", "peers_cancel_truth", "peers_enqueue"}
    assert all(t["met"] is not None for t in names.values())
    report = (run_dir / "report.md").read_text()
    assert "## What each system can do" in report
    assert "## Against the peers" in report
    assert "| redis-everysec | AOF everysec |" in report
    assert "runs on the real clock only" in report
