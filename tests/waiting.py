"""The one bounded condition poll of the tests: wait for a condition, or fail naming it."""

from __future__ import annotations

import time
from collections.abc import Callable

POLL_S = 0.02  # the pause between two looks at the condition


def wait_for(condition: Callable[[], bool], timeout_s: float = 60, what: str = "") -> None:
    """Poll ``condition`` until it holds, for at most ``timeout_s``; fail naming ``what``
    (or the condition) otherwise."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s} s: {what or condition}")
        time.sleep(POLL_S)
