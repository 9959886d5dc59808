"""A real server on a loopback port for the client's tests (stopped by the fixture)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.api.helpers import ThreadServer, make_settings


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[Callable[..., str]]:
    started: list[ThreadServer] = []

    def factory(**overrides: Any) -> str:
        overrides.setdefault("engine", {"tick_ms": 5})
        server = ThreadServer(make_settings(tmp_path / f"data{len(started)}", **overrides))
        url = server.start()
        started.append(server)
        return url

    yield factory
    for server in started:
        server.stop()


@pytest.fixture
def base_url(server_factory: Callable[..., str]) -> str:
    return server_factory()
