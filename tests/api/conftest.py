"""API fixtures (helpers in ``tests.api.helpers``)."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from app.clock import FakeClock
from app.engine.sinks import Sink
from app.service import TimerService
from tests.api.helpers import T0_MS, FakeApi, ThreadServer, make_settings


@pytest.fixture
def fake_api_factory(tmp_path: Path) -> Iterator[Callable[..., FakeApi]]:
    opened: list[TestClient] = []

    def factory(*, sink: Sink | None = None, **overrides: Any) -> FakeApi:
        clock = FakeClock(T0_MS)
        settings = make_settings(tmp_path / f"data{len(opened)}", **overrides)
        service = TimerService(settings, clock, sink=sink, run_engine=False)
        client = TestClient(create_app(settings, service=service))
        client.__enter__()
        opened.append(client)
        return FakeApi(client, service, clock)

    yield factory
    for client in opened:
        client.__exit__(None, None, None)


@pytest.fixture
def fake_api(fake_api_factory: Callable[..., FakeApi]) -> FakeApi:
    return fake_api_factory()


@pytest.fixture
def live_factory(tmp_path: Path) -> Iterator[Callable[..., tuple[httpx.Client, ThreadServer]]]:
    numbers = itertools.count()
    # ExitStack: every cleanup runs even if one fails; each client is closed before the
    # server it talks to is stopped (last in, first out)
    with contextlib.ExitStack() as cleanup:

        def factory(**overrides: Any) -> tuple[httpx.Client, ThreadServer]:
            overrides.setdefault("engine", {"tick_ms": 5})
            server = ThreadServer(make_settings(tmp_path / f"live{next(numbers)}", **overrides))
            cleanup.callback(server.stop)  # registered before start: a failed start is stopped
            client = httpx.Client(base_url=server.start(), timeout=30)
            cleanup.callback(client.close)
            return client, server

        yield factory


@pytest.fixture
def live(live_factory: Callable[..., tuple[httpx.Client, ThreadServer]]) -> httpx.Client:
    return live_factory()[0]
