"""Why the service is not ready (``/readyz`` 503), or None when it is.

Not ready while starting or shutting down; in a cluster, until the node has joined
(connected, and every partition it owns restored); while the disk under the store is full (from
the write that found it full until one succeeds again); and while a stage of the engine
(scanner, dispatcher) has failed every step for longer than
``engine.stage_failure_unready_ms``. A load balancer then stops sending requests that
would fail, and an orchestrator sees a service that does not deliver.
"""

from __future__ import annotations

from app.cluster_view import is_caught_up
from app.engine import Engine
from storage.protocol import SupportsWriteHealth, TimerStore

DISK_FULL = "the disk under the store is full: writes are refused until space is freed"
NOT_JOINED = "joining the cluster: not connected, or a partition it owns is not restored yet"
MAX_ERROR_CHARS = 300  # of a stage's last error, in the reason


def unready_reason(
    store: TimerStore | None, engine: Engine | None, *, started: bool, now_ms: int
) -> str | None:
    """``started``: accepting requests, with the store open and the engine running."""
    if not started or store is None:
        return "starting or shutting down"
    if not is_caught_up(store):
        return NOT_JOINED
    if isinstance(store, SupportsWriteHealth) and store.disk_full():
        return DISK_FULL
    if engine is not None:
        limit_ms = engine.settings.stage_failure_unready_ms
        for name, failing_ms, error in engine.failing_stages(now_ms):
            if failing_ms > limit_ms:
                return (
                    f"{name} has failed every step for {failing_ms} ms (more than "
                    f"engine.stage_failure_unready_ms): {error[:MAX_ERROR_CHARS]}"
                )
    return None


def needs_write_probe(store: TimerStore | None) -> SupportsWriteHealth | None:
    """The store, when its disk was full at the last write: a probe write tells whether
    space is back (with no traffic, nothing else would write)."""
    if isinstance(store, SupportsWriteHealth) and store.disk_full():
        return store
    return None
