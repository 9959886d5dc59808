"""The README's and the docs pages' examples run as written, in order, against a real server.

The convention (docs/development.md, "Examples that run", repeats it for writers):

- Every ```sh and ```python block of README.md and of each page in ``PAGES`` runs, in the
  page's order, against one ``timerstore serve`` on a free loopback port and a fresh data
  directory per page; ``localhost:8080`` and ``127.0.0.1:8080`` in a block are rewritten to
  that server. A block that must not run (it needs ``make``, another service, a file of
  the reader's) is fenced ```sh no-run or ```python no-run.
- A sh block runs in bash as one script. Each curl command in it may be followed by a
  comment ``# -> STATUS`` and the JSON the answer shows (continued on comment lines indented
  by two spaces or more): the status must be STATUS and the body must match, objects with
  exactly the keys shown and arrays with exactly the items shown, where ``...`` as a value
  matches any value and ``...`` last in an object or array stands for more keys or items.
  A curl command with no ``# ->`` must answer 2xx.
- A python block runs with ``exec`` in one namespace per page, so a later block may use
  what an earlier one made; its ``assert`` statements are its checks and it must not raise.
- Examples use times relative to now (``delay_ms``, or ``$(date +%s)`` arithmetic) and
  ids of their own on each page, so a page runs top to bottom on a fresh store, and fast:
  a long-poll's ``wait_ms`` only waits for what is about to arrive.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.api.helpers import ROOT, ServerProcess
from tests.docs.examples import Block, mismatch, parse_shape, runnable_blocks

PAGES = ("README.md", "docs/api.md", "docs/client.md", "docs/sinks.md")
DEFAULT_ADDRESS = re.compile(r"(localhost|127\.0\.0\.1):8080")
CURL = """
ts_calls=0
curl() {
    ts_calls=$((ts_calls + 1))
    command curl -sS -o "$TS_OUT/$ts_calls.body" -w '%{http_code}' "$@" > "$TS_OUT/$ts_calls.status"
}
"""


def _curl() -> None:
    """curl, which ``make test`` installs before pytest when missing (tools/ensure-packages.sh)."""
    if shutil.which("curl", path="/usr/bin:/bin") is None:
        message = "curl is missing: `make test` installs it (tools/ensure-packages.sh)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def _run_sh(block: Block, address: str, out: Path) -> None:
    out.mkdir()
    script = CURL + DEFAULT_ADDRESS.sub(address, block.code)
    done = subprocess.run(
        ["bash", "-c", script],
        env={"TS_OUT": str(out), "PATH": "/usr/bin:/bin"},
        timeout=60,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, f"line {block.line}: {done.stderr}"
    ran = len(list(out.glob("*.status")))
    assert ran == len(block.calls), f"line {block.line}: {ran} curl calls for {block.calls}"
    for number, call in enumerate(block.calls, 1):
        status = int((out / f"{number}.status").read_text())
        body = (out / f"{number}.body").read_bytes()
        if " -i " in f" {call.command} ":
            body = body.split(b"\r\n\r\n", 1)[1]
        where = f"line {block.line}, {call.command.strip()!r}: {status} {body[:500]!r}"
        if call.status is None:
            assert 200 <= status < 300, where
            continue
        assert status == call.status, where
        if call.shape:
            problem = mismatch(parse_shape(call.shape), json.loads(body))
            assert problem is None, f"{where}\n{problem}"


def _run_python(block: Block, address: str, namespace: dict[str, object]) -> None:
    code = compile(DEFAULT_ADDRESS.sub(address, block.code), f"<line {block.line}>", "exec")
    exec(code, namespace)


def test_the_convention_reads_status_shape_and_no_run() -> None:
    page = (
        '```sh\ncurl -s -X POST localhost:8080/x -d \'{"a": 1,\n  "b": 2}\'\n'
        '# -> 201 {"a": 1, "t": [{"id": "x", ...}, ...],\n#      "n": ...}\n'
        "curl -s localhost:8080/y   # a comment\n```\n"
        "```sh no-run\nmake serve\n```\n```python\nx = 1\n```\n"
    )
    sh, python = runnable_blocks(page)
    assert (sh.language, python.language, python.code) == ("sh", "python", "x = 1\n")
    first, second = sh.calls
    assert (first.status, second.status, second.shape) == (201, None, "")
    shape = parse_shape(first.shape)
    assert mismatch(shape, {"a": 1, "t": [{"id": "x", "z": 0}, {}], "n": None}) is None
    assert mismatch(shape, {"a": 1, "t": [{"id": "y"}], "n": 0}) == "$.t[0].id: 'x' shown, 'y' came"
    assert "not shown ['m']" in str(mismatch(shape, {"a": 1, "t": [{"id": "x"}], "n": 0, "m": 0}))


@pytest.mark.parametrize("page", PAGES)
def test_the_pages_examples_run_as_written(page: str, tmp_path: Path) -> None:
    blocks = runnable_blocks((ROOT / page).read_text())
    assert blocks, f"{page} has no runnable example"
    _curl()
    server = ServerProcess(tmp_path / "data")
    address = server.start().removeprefix("http://")
    namespace: dict[str, object] = {"__name__": "__example__"}
    try:
        for number, block in enumerate(blocks):
            if block.language == "sh":
                _run_sh(block, address, tmp_path / f"block-{number}")
            else:
                _run_python(block, address, namespace)
    finally:
        server.signal()
        server.wait(30)
        server.kill()


def test_the_readme_is_short_and_its_quickstart_starts_with_the_probes() -> None:
    """It was 1,104 lines, its first request at line 51 and /healthz first at line 202."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    first = runnable_blocks(readme)[0]
    assert first.line <= 50 and "/healthz" in first.calls[0].command, first
    assert "/readyz" in first.calls[1].command, first
