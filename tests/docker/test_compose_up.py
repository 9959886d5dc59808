"""docker-compose for real: build the images offline, bring the service and a Spark
cluster up, and drive them the way a user would.

The images are built by ``docker/build-offline.sh`` (a debootstrap base and a wheelhouse,
no registry); every container runs on the host network with ports on 127.0.0.1 chosen
here (``docker-compose.test.yml``). The compose project name is unique, and the fixture
runs ``down -v --remove-orphans`` whatever happens, then checks that no container,
network or volume of the project is left. Docker, Compose v1 and debootstrap come from
apt and dockerd is started by ``docker/ensure-docker.sh``, and the debootstrap base and the
wheelhouse are cached by ``make image-caches``: ``make test`` runs both before pytest.
This test installs and downloads nothing (its traffic stays on the machine): it checks the
tools are there, starts dockerd if it is not running, and builds the images from the
current source out of those caches (``TIMERSTORE_OFFLINE_NO_FETCH=1``). When something is
missing the test says why, and fails instead of skipping under CI=true.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
FILES = ["docker-compose.yml", "docker-compose.offline.yml", "docker-compose.test.yml"]
BULK = 3000  # timers in the Parquet file the import job reads
REST = 40  # timers scheduled and consumed over REST
BUILD_TIMEOUT_S = 1500
JOB_TIMEOUT_S = 600
HEALTH_TIMEOUT_S = 240
# the cluster profile's ports (docker-compose.test.yml): each nats-server's client, route and
# monitoring port, and each node's HTTP port
CLUSTER_PORTS = [
    f"TS_TEST_NATS{i}_{kind}PORT" for i in range(3) for kind in ("", "ROUTE_", "MONITOR_")
] + [f"TS_TEST_NODE{i}_PORT" for i in range(3)]
CLUSTER = ["nats0", "nats1", "nats2", "node0", "node1", "node2"]

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _not_ready(message: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def _docker_ready() -> None:
    missing = [
        tool
        for tool in ("docker", "docker-compose", "debootstrap", "dockerd")
        if shutil.which(tool) is None and not os.path.exists(f"/usr/sbin/{tool}")
    ]
    if missing:
        _not_ready(f"missing {missing}: `make test` installs them (docker/ensure-docker.sh)")
    done = subprocess.run(  # with every tool present this only starts dockerd if needed
        [str(ROOT / "docker/ensure-docker.sh")],
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    if done.returncode != 0:
        _not_ready(f"docker is not usable here: {done.stderr.strip() or done.stdout.strip()}")


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class Compose:
    """``docker-compose`` with this test's files, project name and environment."""

    def __init__(self, project: str, env: dict[str, str], log: Path) -> None:
        self.project = project
        self.env = env
        self.log = log

    def run(self, *args: str, timeout: float = JOB_TIMEOUT_S) -> subprocess.CompletedProcess:
        cmd = ["docker-compose", "-p", self.project]
        for f in FILES:
            cmd += ["-f", str(ROOT / f)]
        started = time.monotonic()
        done = subprocess.run(
            [*cmd, *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        with self.log.open("a") as f:
            seconds = time.monotonic() - started
            f.write(f"$ {' '.join(args)} -> {done.returncode} in {seconds:.1f} s\n")
            f.write(f"{done.stdout}\n{done.stderr}\n")
        return done

    def check(self, *args: str, timeout: float = JOB_TIMEOUT_S) -> str:
        done = self.run(*args, timeout=timeout)
        assert done.returncode == 0, f"{args} (log {self.log}): {done.stderr[-3000:]}"
        return done.stdout

    def job(self, service: str, *command: str) -> str:
        """A one-shot service (or a command in its image), removed when it ends."""
        return self.check("run", "--rm", "-T", service, *command)

    def container(self, service: str) -> str:
        [cid] = self.check("ps", "-q", service).split()
        return cid

    def leftovers(self) -> dict[str, list[str]]:
        label = f"label=com.docker.compose.project={self.project}"
        found = {}
        for kind in ("container", "network", "volume"):
            cmd = ["docker", kind, "ls", "-q", "--filter", label]
            if kind == "container":
                cmd.insert(3, "-a")
            found[kind] = _lines(cmd)
        return found


def _lines(cmd: list[str]) -> list[str]:
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=60, check=True
    ).stdout.split()


def _wait_healthy(compose: Compose, services: list[str]) -> None:
    deadline = time.monotonic() + HEALTH_TIMEOUT_S
    ids = {service: compose.container(service) for service in services}
    waiting = set(services)
    while waiting and time.monotonic() < deadline:
        for service in sorted(waiting):
            state = json.loads(
                subprocess.run(
                    ["docker", "inspect", "-f", "{{json .State}}", ids[service]],
                    capture_output=True,
                    text=True,
                    timeout=60,
                    check=True,
                ).stdout
            )
            assert state["Status"] == "running", (service, state, _logs(compose, service))
            health = state["Health"]["Status"]
            assert health != "unhealthy", (service, state["Health"], _logs(compose, service))
            if health == "healthy":
                waiting.discard(service)
        if waiting:
            time.sleep(1)  # polling a state, not ordering events
    assert not waiting, f"not healthy after {HEALTH_TIMEOUT_S} s: {waiting}"


def _logs(compose: Compose, service: str) -> str:
    return compose.run("logs", "--tail", "40", service, timeout=60).stdout


@pytest.fixture(scope="module")
def images() -> None:
    _docker_ready()
    log = ROOT / "docker" / "build-offline.log"  # ignored by git; read it when a build fails
    with log.open("w") as out:
        done = subprocess.run(
            [str(ROOT / "docker/build-offline.sh")],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "TIMERSTORE_OFFLINE_NO_FETCH": "1"},  # `make image-caches` did
            timeout=BUILD_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    assert done.returncode == 0, log.read_text()[-4000:]


@pytest.fixture
def workdir() -> Iterator[Path]:
    """The import's input folder, bind-mounted into containers: a directory of its own, not
    pytest's tmp_path, which other pytest sessions on the machine may prune meanwhile."""
    with tempfile.TemporaryDirectory(prefix="timerstore-docker-test-") as path:
        yield Path(path)


@pytest.fixture
def compose(images: None, workdir: Path) -> Iterator[Compose]:
    service_port, master_port, master_ui, worker_ui, *cluster = _free_ports(4 + len(CLUSTER_PORTS))
    input_dir = workdir / "input"
    input_dir.mkdir()
    env = {
        **os.environ,
        "TS_TEST_PORT": str(service_port),
        "TS_TEST_MASTER_PORT": str(master_port),
        "TS_TEST_MASTER_UI_PORT": str(master_ui),
        "TS_TEST_WORKER_UI_PORT": str(worker_ui),
        "TS_TEST_INPUT": str(input_dir),
        "TIMERSTORE_ADMIN_KEY": secrets.token_hex(8),
        **{name: str(port) for name, port in zip(CLUSTER_PORTS, cluster, strict=True)},
    }
    project = f"tstest{os.getpid()}{secrets.token_hex(3)}"
    log = ROOT / "docker" / "compose-test.log"  # ignored by git: every command, timed
    log.write_text("")
    c = Compose(project, env, log)
    volumes_before = set(_lines(["docker", "volume", "ls", "-q"]))
    try:
        yield c
    finally:
        # (--profile cluster: Compose v1 acts on a profile's services only with it active)
        c.run(
            "--profile", "cluster", "down", "-v", "--remove-orphans", "--timeout", "10", timeout=300
        )
        left = c.leftovers()
        # anonymous volumes (the image's VOLUME /data in a job container) carry no label
        left["unnamed volume"] = sorted(
            set(_lines(["docker", "volume", "ls", "-q"])) - volumes_before
        )
        assert left == {"container": [], "network": [], "volume": [], "unnamed volume": []}, left


def _write_parquet(path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table(
        {
            "topic": ["bulk"] * BULK,
            "id": [f"b{i}" for i in range(BULK)],
            "delay_ms": [3_600_000 + i for i in range(BULK)],  # pending for an hour
            "payload": [f"imported {i}" for i in range(BULK)],
        }
    )
    pq.write_table(table, path)


def _consume(client: httpx.Client, topic: str, n: int) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []
    deadline = time.monotonic() + 60
    while len(got) < n and time.monotonic() < deadline:
        r = client.get(
            f"/v1/topics/{topic}/messages",
            params={"offset": len(got), "wait_ms": 2000, "limit": 1000},
        )
        assert r.status_code == 200, r.text
        got.extend(r.json()["messages"])
    return got


def _last_json(stdout: str) -> dict[str, Any]:
    """The JSON document a job prints last (Spark may log to stdout before it)."""
    start = stdout.rfind("\n{") + 1
    return dict(json.loads(stdout[start:]))


def test_the_service_and_a_spark_cluster_run_the_whole_pipeline(compose: Compose) -> None:
    _write_parquet(Path(compose.env["TS_TEST_INPUT"]) / "timers.parquet")
    compose.check("up", "-d", "--no-build", "timerstore", "spark-master", "spark-worker")
    _wait_healthy(compose, ["timerstore", "spark-master", "spark-worker"])

    base = f"http://127.0.0.1:{compose.env['TS_TEST_PORT']}"
    with httpx.Client(base_url=base, timeout=30) as client:
        for i in range(REST):
            body = {"topic": "rest", "id": f"r{i}", "delay_ms": 50 * (i % 5), "payload": str(i)}
            r = client.post("/v1/timers", json=body)
            assert r.status_code == 201, r.text
        got = _consume(client, "rest", REST)
        assert sorted(m["id"] for m in got) == sorted(f"r{i}" for i in range(REST))
        assert all(m["delivered_at_ms"] >= m["deliver_at_ms"] for m in got)

        result = _last_json(compose.job("import"))
        assert (result["import"]["rows_read"], result["import"]["rejected"]) == (BULK, 0)
        assert result["ingest"]["added"] == BULK
        assert client.get("/v1/stats").json()["pending"] == BULK
        for i in (0, BULK // 2, BULK - 1):
            timer = client.get(f"/v1/timers/bulk/b{i}").json()
            assert timer["state"] == "pending", timer
        early = client.get("/v1/topics/bulk/messages", params={"offset": 0}).json()
        assert early["messages"] == []  # none of them came early

    _assert_ran_on_the_cluster(compose, "timerstore-import")

    exported = _last_json(compose.job("export"))
    assert exported["deliveries"] == REST
    analysis = _last_json(compose.job("analyze"))
    assert analysis["overall"]["deliveries"] == REST and analysis["overall"]["early"] == 0
    listing = compose.job("export", "find", "/reports/report", "-maxdepth", "1").split()
    assert "/reports/report/report.md" in listing
    assert "/reports/report/by_topic.parquet" in listing
    report = compose.job("export", "cat", "/reports/report/report.md")
    assert "rest" in report
    _assert_ran_on_the_cluster(compose, "timerstore-analyze")


def test_the_cluster_profile_runs_three_nodes_that_deliver_through_any_of_them(
    compose: Compose,
) -> None:
    """``--profile cluster``: three nats-servers and three nodes of the service image join,
    every partition gets a live owner, and a timer scheduled on one node is delivered once
    and read back from another."""
    compose.check("--profile", "cluster", "up", "-d", "--no-build", *CLUSTER)
    _wait_healthy(compose, CLUSTER)
    urls = [f"http://127.0.0.1:{compose.env[f'TS_TEST_NODE{i}_PORT']}" for i in range(3)]

    def view() -> dict[str, Any]:
        return dict(httpx.get(f"{urls[0]}/v1/cluster", timeout=10).json())

    def settled() -> bool:
        seen = view()
        alive = {m["node_id"] for m in seen["nodes"] if m["alive"]}
        return alive == {"n0", "n1", "n2"} and None not in {o["node_id"] for o in seen["owners"]}

    wait_for(settled, HEALTH_TIMEOUT_S, "every node alive and every partition owned")
    seen = view()
    assert seen["partitions"] == 16 and len(seen["owners"]) == 16
    topics = [f"compose-{i}" for i in range(8)]  # spread over the partitions
    for i, topic in enumerate(topics):
        body = {"topic": topic, "id": "t", "delay_ms": 200, "payload": topic}
        r = httpx.post(f"{urls[i % 3]}/v1/timers", json=body, timeout=30)
        assert r.status_code == 201, r.text
    for i, topic in enumerate(topics):
        with httpx.Client(base_url=urls[(i + 1) % 3], timeout=30) as reader:
            [message] = _consume(reader, topic, 1)
        assert (message["id"], message["offset"]) == ("t", 0)
        assert message["delivered_at_ms"] >= message["deliver_at_ms"]


def _assert_ran_on_the_cluster(compose: Compose, app_name: str) -> None:
    """The job was an application of the standalone master whose executors ran on the worker."""
    env = compose.env
    master_url = f"http://127.0.0.1:{env['TS_TEST_MASTER_UI_PORT']}/json/"
    worker_url = f"http://127.0.0.1:{env['TS_TEST_WORKER_UI_PORT']}/json/"
    deadline = time.monotonic() + 60
    while True:  # the worker files an executor as finished once its process has exited
        master = httpx.get(master_url, timeout=10).json()
        worker = httpx.get(worker_url, timeout=10).json()
        apps = {app["name"] for app in master["completedapps"]}
        executors = {e["appdesc"]["name"] for e in worker["finishedexecutors"]}
        if {app_name} <= apps & executors or time.monotonic() > deadline:
            break
        time.sleep(1)  # polling a state, not ordering events
    assert master["aliveworkers"] == 1, master
    assert app_name in apps, master["completedapps"]
    assert app_name in executors, worker["finishedexecutors"]
