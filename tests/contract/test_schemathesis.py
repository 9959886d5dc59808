"""The OpenAPI contract, checked by schemathesis against the real server.

A real uvicorn server (real RocksDB in a temp dir, engine running) on a loopback port;
schemathesis' CLI reads its ``/openapi.json`` and runs the examples, coverage, fuzzing
and stateful phases (the stateful walk follows the document's links: schedule, then get,
list, cancel, consume, replay) with every check, a bounded number of examples per
operation and a fixed seed. It runs with an API key (so ``ignored_auth`` is checked too)
and without one. Any failure fails the test. A third test breaks two responses on
purpose and shows that the same run catches them: a 500 and a schema mismatch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zlib
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from storage.protocol import LOG_SINK, DueTimer
from tests.api.helpers import ROOT, ThreadServer, make_settings

pytestmark = pytest.mark.slow

EXAMPLES = 100  # per operation and phase: about 1,500 test cases (~1 min) a run on 2 cores
SEED = 20261123
HOOKS = "tests.contract.schemathesis_hooks"  # the msgpack serializer
# long-polls are capped at 50 ms so that fuzzed wait_ms values cost little; the document
# states this server's cap, so schemathesis generates nothing above it
LIMITS = {"max_wait_ms": 50}

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def _schemathesis(url: str, workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cli = "from schemathesis.cli import schemathesis; schemathesis()"
    cmd = [sys.executable, "-c", cli, "run", f"{url}/openapi.json", "--checks", "all"]
    cmd += ["--seed", str(SEED), "--generation-database", "none", "--no-color", "--workers", "1"]
    cmd += ["--report", "json", "--report-json-path", str(workdir / "report.json"), *args]
    env = {**os.environ, "SCHEMATHESIS_HOOKS": HOOKS, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=900, check=False
    )


class HalfFailingLogSink:
    """The topic log, except that a batch whose first id hashes odd fails (deterministic).

    With ``max_attempts`` 1 such a timer becomes a dead letter at once, so the stateful
    walk finds messages to consume and dead letters to replay alike.
    """

    name = LOG_SINK

    def start(self) -> None:
        return None

    def stop(self) -> None:
        return None

    def deliver(self, batch: Sequence[DueTimer]) -> None:
        if batch and zlib.crc32(batch[0].id.encode()) % 2:
            raise RuntimeError("the contract run's sink fails this batch on purpose")


def _serve(tmp_path: Path, name: str, **overrides: Any) -> ThreadServer:
    engine = {"tick_ms": 5, "max_attempts": 1}
    settings = make_settings(tmp_path / name, engine=engine, limits=LIMITS, **overrides)
    return ThreadServer(settings, sink=HalfFailingLogSink())


def _full_run(server: ThreadServer, workdir: Path, *headers: str) -> tuple[str, dict[str, Any]]:
    """The run's output, and the server's stats at its end."""
    url = server.start()
    try:
        phases = "examples,coverage,fuzzing,stateful"
        done = _schemathesis(url, workdir, "--phases", phases, "-n", str(EXAMPLES), *headers)
        auth = dict(h.split(": ", 1) for h in headers[1::2])
        stats = httpx.get(f"{url}/v1/stats", headers=auth).json()
    finally:
        server.stop()
    assert done.returncode == 0, done.stdout[-20_000:] + done.stderr[-5000:]
    return done.stdout, stats


def _tested(out: str) -> int:
    """How many test cases the summary says were generated and passed."""
    line = next(x for x in out.splitlines() if " generated, " in x)
    generated = int(line.split()[0])
    assert f"{generated} generated, {generated} passed" in line, line
    return generated


def _summary(out: str) -> str:
    keep = ("(in ", "Scenarios:", "API Links:")
    lines = [x.strip() for x in out.splitlines() if any(k in x for k in keep)]
    return " | ".join([*lines, *(x.strip() for x in out.splitlines() if " generated, " in x)])


@pytest.mark.parametrize("keyed", [True, False], ids=["api-key", "open"])
def test_the_server_keeps_its_openapi_contract(tmp_path: Path, keyed: bool) -> None:
    workdir = tmp_path / "st"
    workdir.mkdir()
    keys = {"api_keys": ["contract-key"]} if keyed else {}
    server = _serve(tmp_path, "data", **keys)
    headers = ("-H", "Authorization: Bearer contract-key") if keyed else ()
    out, stats = _full_run(server, workdir, *headers)
    print(_summary(out))  # the figures, for `pytest -s`
    assert _tested(out) > 1000, out[-3000:]
    report = json.loads((workdir / "report.json").read_text())
    assert {name: p["status"] for name, p in report["phases"].items()} == dict.fromkeys(
        ("examples", "coverage", "fuzzing", "stateful"), "success"
    )
    assert report["test_cases"]["with_failures"] == 0 and report["failures"] == []
    ops = report["operations"]
    assert report["errors"] == [] and ops["tested"] == ops["total"] >= 13, ops
    # the half-failing sink made dead letters and delivered messages for the walk to find
    # (whether the generator then picks a dead letter's topic and id to replay is its luck)
    assert stats["dead_lettered"] > 0 and stats["delivered"] > 0, stats


class BreakTwoResponses:
    """ASGI middleware: ``/v1/stats`` answers 500, ``/v1/topics`` a body off its schema."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path")
        if scope["type"] != "http" or path not in ("/v1/stats", "/v1/topics"):
            await self.app(scope, receive, send)
            return
        status, body = (500, b"{}") if path == "/v1/stats" else (200, b'{"topics": "none"}')
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def test_the_contract_run_catches_a_server_error_and_a_schema_mismatch(tmp_path: Path) -> None:
    workdir = tmp_path / "st"
    workdir.mkdir()
    server = _serve(tmp_path, "data")
    server.app.add_middleware(BreakTwoResponses)
    url = server.start()
    try:
        only = ("--include-path-regex", "^/v1/(stats|topics)$")
        done = _schemathesis(url, workdir, "--phases", "examples,fuzzing", "-n", "5", *only)
    finally:
        server.stop()
    assert done.returncode == 1, done.stdout[-5000:]
    assert "Server error" in done.stdout, done.stdout[-5000:]
    assert "Response violates schema" in done.stdout, done.stdout[-5000:]
