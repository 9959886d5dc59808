"""The cluster's settings at startup: the wheel store with a cluster is refused, naming both."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from app.config import load_settings
from app.stores import open_store
from cluster.natsd import free_port
from storage.errors import ConfigError
from tests.cluster.conftest import ROOT

WHEEL_IN_A_CLUSTER = {
    "TIMERSTORE_STORE": "wheel",
    "TIMERSTORE_CLUSTER__NATS_URLS": "nats://127.0.0.1:1",
    "TIMERSTORE_CLUSTER__NODE_ID": "n0",
}


def test_the_wheel_store_in_a_cluster_is_a_config_error_naming_both(tmp_path: Path) -> None:
    env = {**WHEEL_IN_A_CLUSTER, "TIMERSTORE_DATA_DIR": str(tmp_path)}
    with pytest.raises(ConfigError) as caught:
        open_store(load_settings(environ=env))
    assert caught.value.field == "store"
    assert "store='wheel'" in caught.value.message
    assert "cluster.nats_urls" in caught.value.message
    assert not (tmp_path / "wheel").exists()  # nothing was opened


def test_serve_says_so_in_one_line_and_exits_with_the_bad_settings_status(tmp_path: Path) -> None:
    env = {**WHEEL_IN_A_CLUSTER, "TIMERSTORE_DATA_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    env["TIMERSTORE_PORT"] = str(free_port())
    done = subprocess.run(
        [sys.executable, "-m", "timerstore", "serve"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("timerstore serve: store='wheel' cannot run with cluster.nats_urls")
