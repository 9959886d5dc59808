"""``timerstore --help`` and each command's help read as help for a user: no module
docstring, no reStructuredText markup, a description for every command, and a bad option of
a command answered with that command's usage (run as a user runs it: a subprocess)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.api.helpers import ROOT

COMMANDS = ("serve", "migrate", "bench", "import", "export-deliveries", "analyze")


def _timerstore(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "timerstore", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _description(help_text: str) -> str:
    """The paragraph between the usage and the first argument list."""
    body = help_text.split("\n\n", 1)[1]
    return body.split("\n\n", 1)[0] if not body.startswith(("positional", "options")) else ""


def test_top_level_help_describes_the_service_not_the_code() -> None:
    done = _timerstore("--help")
    assert done.returncode == 0, done.stderr
    description = _description(done.stdout)
    assert "timer service" in description, done.stdout
    for internal in ("composition root", "register(", "``", "subparsers"):
        assert internal not in done.stdout, internal
    for command in COMMANDS:
        assert command in done.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_a_description_without_markup(command: str) -> None:
    done = _timerstore(command, "--help")
    assert done.returncode == 0, done.stderr
    description = _description(done.stdout)
    assert len(description.split()) >= 8, f"{command} --help has no description: {done.stdout}"
    assert "``" not in done.stdout and ":func:" not in done.stdout, done.stdout


@pytest.mark.parametrize("command", ["serve", "migrate", "bench"])
def test_an_unknown_option_is_the_commands_own_usage_error(command: str) -> None:
    done = _timerstore(command, "--prot", "9999")
    assert done.returncode == 2
    assert done.stderr.startswith(f"usage: timerstore {command} "), done.stderr
    assert f"timerstore {command}: error: unrecognized arguments: --prot 9999" in done.stderr
