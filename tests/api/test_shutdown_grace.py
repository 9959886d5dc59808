"""``shutdown_grace_ms`` is how long a request in progress may go on after SIGTERM, to the
millisecond (it was rounded down to whole seconds, and 0 to 1 s); 0 means not at all.

A real ``timerstore serve``; the request in progress is a POST whose body never ends.
It is known to be inside the app before the signal: it says ``Expect: 100-continue``,
and uvicorn sends "100 Continue" only when the app starts reading the body.
"""

from __future__ import annotations

import signal
import socket
import time
from pathlib import Path

from tests.api.helpers import ServerProcess

CANCELLED = "timeout graceful shutdown exceeded"  # uvicorn's line when it cancels requests


def _stop_during_a_request(data_dir: Path, grace_ms: int) -> tuple[float, ServerProcess]:
    """Seconds from SIGTERM to the exit, with one request in progress all along."""
    server = ServerProcess(data_dir, {"TIMERSTORE_SHUTDOWN_GRACE_MS": str(grace_ms)})
    url = server.start()
    port = int(url.rsplit(":", 1)[1])
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as slow:
            slow.sendall(
                b"POST /v1/timers HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 100\r\nExpect: 100-continue\r\n\r\n"
            )
            assert slow.recv(100).startswith(b"HTTP/1.1 100 Continue")
            slow.sendall(b"{")  # and never the other 99 bytes
            started = time.monotonic()
            server.signal(signal.SIGTERM)
            code = server.wait(30)
            elapsed = time.monotonic() - started
    finally:
        server.kill()
    assert code == 0, server.log()
    return elapsed, server


def test_a_grace_of_1700_ms_lets_a_request_go_on_for_1700_ms(tmp_path: Path) -> None:
    elapsed, server = _stop_during_a_request(tmp_path / "data", 1700)
    assert 1.7 <= elapsed < 15, elapsed  # it was 1 s: 1700 // 1000
    assert "Cancel 1 running task(s), " + CANCELLED in server.log()


def test_a_grace_of_0_cancels_requests_at_once_and_an_idle_stop_logs_no_error(
    tmp_path: Path,
) -> None:
    elapsed, server = _stop_during_a_request(tmp_path / "busy", 0)
    assert "Cancel 1 running task(s), " + CANCELLED in server.log()
    # against the same stop with a grace of 1 s, not against a wall-clock bound: 0 became
    # 1 s, so the two took the same time
    elapsed_1000, _ = _stop_during_a_request(tmp_path / "busy-1000", 1000)
    assert elapsed_1000 >= 1.0
    assert elapsed < elapsed_1000 - 0.5, (elapsed, elapsed_1000)

    idle = ServerProcess(tmp_path / "idle", {"TIMERSTORE_SHUTDOWN_GRACE_MS": "0"})
    try:
        idle.start()
        idle.signal(signal.SIGTERM)
        assert idle.wait(30) == 0, idle.log()
    finally:
        idle.kill()
    # asyncio.wait_for with 0 cancels even a wait with nothing to wait for: no error then
    assert CANCELLED not in idle.log() and "service stopped" in idle.log()
