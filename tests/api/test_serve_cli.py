"""The ``timerstore serve`` subcommand: its flags, a bad setting, a data directory it
cannot open, a port in use (one clear line and its own exit status, never a traceback)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from api.server import EXIT_BAD_SETTINGS, EXIT_CANNOT_LISTEN, EXIT_STORE_UNAVAILABLE
from app.config import load_settings
from storage.protocol import NewTimer
from storage.rocks import RocksTimerStore
from storage.wheel import WheelTimerStore
from tests.api.helpers import ROOT, ServerProcess, free_port


def test_serve_help_lists_the_flags() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "timerstore", "serve", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    for flag in ("--host", "--port", "--data-dir", "--store", *CLUSTER_FLAGS):
        assert flag in out


CLUSTER_FLAGS = (
    "--nats-urls",
    "--node-id",
    "--advertise-url",
    "--partitions",
    "--replicas",
    "--lease-ms",
)


def test_cluster_flags_reach_the_settings_over_the_variables(tmp_path: Path) -> None:
    """A single node shows its cluster settings in GET /v1/cluster: the flags win over the
    variables, field by field."""
    env = {"TIMERSTORE_CLUSTER__NODE_ID": "from-env", "TIMERSTORE_CLUSTER__PARTITIONS": "4"}
    flags = ["--node-id", "from-flag", "--advertise-url", "http://node.example:9"]
    server = ServerProcess(tmp_path / "data", env, [*flags, "--partitions", "8"])
    try:
        view = httpx.get(server.start() + "/v1/cluster", timeout=10).json()
    finally:
        server.kill()
    assert view["node_id"] == "from-flag"
    assert view["partitions"] == 8 and len(view["owners"]) == 8
    assert view["nodes"] == [
        {"node_id": "from-flag", "url": "http://node.example:9", "alive": True}
    ]


def test_a_bad_cluster_flag_is_one_line_naming_the_setting(tmp_path: Path) -> None:
    done = _serve_once(tmp_path / "data", "--replicas", "2")
    assert done.returncode == EXIT_BAD_SETTINGS, done.stderr
    assert done.stderr.strip() == "timerstore serve: cluster.replicas must be 1, 3 or 5"


def _serve_once(
    data_dir: Path, *flags: str, port: int | None = None
) -> subprocess.CompletedProcess[str]:
    """``timerstore serve`` on ``data_dir`` with a free port (or ``port``); it must stop by
    itself (``subprocess.run`` kills it at the timeout)."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "timerstore",
            "serve",
            "--data-dir",
            str(data_dir),
            "--host",
            "127.0.0.1",
            "--port",
            str(free_port() if port is None else port),
            *flags,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
        check=False,
    )


def _filled_store(data_dir: Path) -> Path:
    """A rocks store with flushed SST files; returns its directory."""
    store = RocksTimerStore(
        load_settings(environ={}, overrides={"data_dir": str(data_dir)}).rocks_settings()
    )
    store.schedule([NewTimer("t", f"i{n}", 2_000_000_000_000) for n in range(100)], 1_000)
    store.flush()
    store.close()
    return data_dir / "rocks"


def _assert_one_clear_line(
    done: subprocess.CompletedProcess[str], data_dir: Path, cause: str
) -> None:
    assert done.returncode == EXIT_STORE_UNAVAILABLE, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr  # one line
    assert str(data_dir) in lines[0] and cause in lines[0].lower(), lines[0]


@pytest.mark.parametrize("store", ["rocks", "wheel"])
def test_a_data_directory_locked_by_another_process_is_one_clear_line(
    tmp_path: Path, store: str
) -> None:
    """The wheel store had no lock: a second service on its directory started, and what
    the first acknowledged was lost when the second one checkpointed."""
    settings = load_settings(environ={}, overrides={"data_dir": str(tmp_path)})
    if store == "rocks":
        _filled_store(tmp_path)
        holder: RocksTimerStore | WheelTimerStore = RocksTimerStore(settings.rocks_settings())
    else:
        holder = WheelTimerStore(settings.wheel_settings())
    try:
        done = _serve_once(tmp_path, "--store", store)
        _assert_one_clear_line(done, tmp_path / store, "another process holds it")
        assert "--data-dir" in done.stderr  # and what to do
    finally:
        holder.close()
    # the lock went with the holder's close
    if store == "rocks":
        RocksTimerStore(settings.rocks_settings()).close()
    else:
        WheelTimerStore(settings.wheel_settings()).close()


def test_a_missing_sst_file_is_one_clear_line(tmp_path: Path) -> None:
    rocks_dir = _filled_store(tmp_path)
    sorted(rocks_dir.glob("*.sst"))[0].unlink()
    _assert_one_clear_line(_serve_once(tmp_path), rocks_dir, "corrupt")


def test_a_corrupt_sst_file_is_one_clear_line(tmp_path: Path) -> None:
    rocks_dir = _filled_store(tmp_path)
    sst = sorted(rocks_dir.glob("*.sst"))[0]
    with sst.open("r+b") as f:  # the footer holds the magic number RocksDB checks on open
        f.seek(-48, 2)
        f.write(b"\xff" * 48)
    _assert_one_clear_line(_serve_once(tmp_path), rocks_dir, "corrupt")


@pytest.mark.parametrize("store", ["rocks", "wheel"])
def test_a_data_directory_that_is_a_file_is_one_clear_line(tmp_path: Path, store: str) -> None:
    data_file = tmp_path / "data"
    data_file.write_text("not a directory")
    done = _serve_once(data_file, "--store", store)
    _assert_one_clear_line(done, data_file, "not a directory")
    assert "--data-dir" in done.stderr  # and what to do
    assert data_file.read_text() == "not a directory"  # nothing written over it


@pytest.mark.parametrize("store", ["rocks", "wheel"])
def test_a_data_directory_under_a_file_is_one_clear_line(tmp_path: Path, store: str) -> None:
    (tmp_path / "file").write_text("x")
    data_dir = tmp_path / "file" / "data"
    _assert_one_clear_line(_serve_once(data_dir, "--store", store), data_dir, "not a directory")


def test_a_port_in_use_is_one_clear_line_with_its_own_exit_status(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        done = _serve_once(tmp_path / "data", port=port)
    assert done.returncode == EXIT_CANNOT_LISTEN != EXIT_STORE_UNAVAILABLE, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"127.0.0.1:{port}" in lines[0] and "in use" in lines[0].lower(), lines[0]
    assert "--port" in lines[0]  # what to do
