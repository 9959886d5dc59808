"""The sink settings of the tests that post to a real receiver.

A route's timeout that passes while the receiver is answering is a failed attempt, and
the retry then reaches the receiver a second time: at-least-once, as documented. Most
sink tests count arrivals exactly, so their routes wait far longer than any stall of a
loaded CI machine (a 5 s default tripped once in CI, a request queued behind the
receiver's threads). Tests of the timeout itself set ``timeout_ms`` on their route.
"""

from __future__ import annotations

from typing import Any

from app.routing import SinkSettings

LOADED_MACHINE_TIMEOUT_MS = 30_000


def sink_settings(**overrides: Any) -> SinkSettings:
    """SinkSettings for a test: a short stop wait and a load-proof default timeout."""
    fields = {"stop_wait_ms": 500, "default_timeout_ms": LOADED_MACHINE_TIMEOUT_MS}
    return SinkSettings(**{**fields, **overrides})
