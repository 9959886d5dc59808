"""The ``timerstore serve`` subcommand: its flags and a bad setting."""

from __future__ import annotations

import subprocess
import sys

from tests.api.helpers import ROOT


def test_serve_help_lists_the_flags() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "timerstore", "serve", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    for flag in ("--host", "--port", "--data-dir", "--store"):
        assert flag in out


def test_bad_setting_exits_2_with_the_field(tmp_path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "timerstore", "serve", "--data-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={"TIMERSTORE_LIMITS__MAX_BODY_BYTES": "0", "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "max_body_bytes" in done.stderr
