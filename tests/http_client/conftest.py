"""A real server on a loopback port for the client's tests (stopped by the fixture)."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.api.helpers import ThreadServer, make_settings


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[Callable[..., str]]:
    numbers = itertools.count()
    with contextlib.ExitStack() as cleanup:  # every server is stopped, even if one fails

        def factory(**overrides: Any) -> str:
            overrides.setdefault("engine", {"tick_ms": 5})
            server = ThreadServer(make_settings(tmp_path / f"data{next(numbers)}", **overrides))
            cleanup.callback(server.stop)  # registered before start: a failed start is stopped
            return server.start()

        yield factory


@pytest.fixture
def base_url(server_factory: Callable[..., str]) -> str:
    return server_factory()
