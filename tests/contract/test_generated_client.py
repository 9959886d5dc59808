"""A client generated from ``/openapi.json`` by a standard generator works against the server.

openapi-python-client (pinned) reads the live server's document and writes a package
into a temp dir; the test imports it and schedules, gets, lists and cancels one timer
with it, so the document keeps producing working clients for other languages too.
The only warning allowed is msgpack, a media type this generator does not support.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.helpers import ThreadServer, make_settings

PACKAGE = "timerstore_generated_client"
KEY = "gen-key"


def _generate(url: str, where: Path) -> None:
    (where / "openapi.json").write_bytes(httpx.get(f"{url}/openapi.json").content)
    cmd = [sys.executable, "-m", "openapi_python_client", "generate", "--meta", "none"]
    cmd += ["--path", str(where / "openapi.json"), "--output-path", str(where / PACKAGE)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    said = (done.stdout + done.stderr).splitlines()
    warnings = [line for line in said if line.startswith("WARNING")]
    unsupported = [line for line in said if "Unsupported" in line]
    assert len(warnings) == len(unsupported) == 3, said  # the three msgpack bodies
    assert all("application/msgpack" in line for line in unsupported), said


@pytest.fixture
def generated(tmp_path: Path) -> Iterator[tuple[Any, str]]:
    settings = make_settings(tmp_path / "data", api_keys=[KEY], engine={"tick_ms": 5})
    server = ThreadServer(settings)
    url = server.start()
    sys.path.insert(0, str(tmp_path))
    try:
        _generate(url, tmp_path)
        yield __import__(PACKAGE, fromlist=["api", "models"]), url
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m.split(".")[0] == PACKAGE]:
            del sys.modules[name]
        server.stop()


def test_a_generated_client_schedules_gets_lists_and_cancels(generated: tuple[Any, str]) -> None:
    package, url = generated
    from timerstore_generated_client.api.timers import (  # type: ignore[import-not-found]
        cancel_batch,
        cancel_timer,
        get_timer,
        list_timers,
        schedule_timer,
    )
    from timerstore_generated_client.models import (  # type: ignore[import-not-found]
        BatchCancelled,
        CancelBatch,
        ErrorBody,
        Timer,
        TimerCreate,
    )

    client = package.AuthenticatedClient(base_url=url, token=KEY)
    body = TimerCreate(topic="gen", id="g1", delay_ms=600_000, payload="hello")
    made = schedule_timer.sync_detailed(client=client, body=body)
    assert made.status_code == 201 and isinstance(made.parsed, Timer), made.content
    assert (made.parsed.topic, made.parsed.id, made.parsed.state) == ("gen", "g1", "pending")
    got = get_timer.sync("gen", "g1", client=client)
    assert isinstance(got, Timer) and got.payload == "hello"
    assert got.deliver_at_ms == made.parsed.deliver_at_ms
    page = list_timers.sync(client=client, topic="gen", limit=10)
    assert [t.id for t in page.timers] == ["g1"]
    assert cancel_timer.sync_detailed("gen", "g1", client=client).status_code == 204
    refs = CancelBatch.from_dict({"timers": [{"topic": "gen", "id": "g1"}]})
    answer = cancel_batch.sync(client=client, body=refs)
    assert isinstance(answer, BatchCancelled) and answer.cancelled == 0
    assert [(t.id, t.outcome) for t in answer.timers] == [("g1", "unknown")]
    gone = get_timer.sync_detailed("gen", "g1", client=client)
    assert gone.status_code == 404 and isinstance(gone.parsed, ErrorBody)
    assert gone.parsed.error.code == "not_found"
    bad = schedule_timer.sync_detailed(client=client, body=TimerCreate(topic="gen", delay_ms=-1))
    assert bad.status_code == 422 and bad.parsed.error.field == "delay_ms"
    anonymous = package.Client(base_url=url)
    assert get_timer.sync_detailed("gen", "g1", client=anonymous).status_code == 401
