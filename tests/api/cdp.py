"""Headless Chromium driven over the DevTools protocol on a pipe (no extra packages).

``--remote-debugging-pipe`` makes Chromium read commands from fd 3 and write replies to
fd 4, each a JSON object ended by a NUL byte. A test types, clicks and reads the page as
a person would, through ``Runtime.evaluate``; waits poll a condition in the page up to a
deadline (never a bare sleep).
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.api.test_docs_browser import FLAGS


class CdpError(AssertionError):
    pass


class Browser:
    def __init__(self, binary: str, profile: Path, window: str = "1280,1150") -> None:
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        # move Chromium's ends above 9, clear of the fds 3 and 4 they are redirected to
        to_chrome_r = _above_nine(to_chrome_r)
        from_chrome_w = _above_nine(from_chrome_w)
        args = [*FLAGS, f"--user-data-dir={profile}", f"--window-size={window}"]
        args += ["--remote-debugging-pipe", "about:blank"]
        # bash puts our pipe ends on fds 3 and 4, where Chromium expects them
        script = f'exec "$0" "$@" 3<&{to_chrome_r} 4>&{from_chrome_w}'
        profile.mkdir(parents=True, exist_ok=True)
        with open(profile.parent / "chromium.log", "wb") as log:
            self.proc = subprocess.Popen(
                ["bash", "-c", script, binary, *args],
                pass_fds=(to_chrome_r, from_chrome_w),
                stdout=log,
                stderr=log,
            )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer = b""
        self._next_id = 0
        self.session: str | None = None
        self.events: list[dict[str, Any]] = []

    # ----------------------------------------------------------------- protocol
    def _send(self, method: str, params: dict[str, Any], session: str | None) -> int:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        return self._next_id

    def _read(self, timeout_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while b"\0" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.proc.poll() is not None:
                raise CdpError("no reply from Chromium")
            if not select.select([self._from_chrome], [], [], min(remaining, 1.0))[0]:
                continue
            chunk = os.read(self._from_chrome, 1 << 16)
            if not chunk:
                raise CdpError("Chromium closed the pipe")
            self._buffer += chunk
        raw, _, self._buffer = self._buffer.partition(b"\0")
        reply: dict[str, Any] = json.loads(raw)
        return reply

    def call(self, method: str, timeout_s: float = 30, **params: Any) -> dict[str, Any]:
        """The reply to ``method``, within ``timeout_s`` in all: events that arrive first are
        kept in ``events``, and each read waits only for the time left, so a stream of
        events without the reply cannot stretch the wait."""
        call_id = self._send(method, params, self.session if "." in method else None)
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise CdpError(f"{method}: no reply within {timeout_s} s")
            try:
                reply = self._read(remaining)
            except CdpError as err:
                raise CdpError(f"{method}: {err} (waited up to {timeout_s} s)") from err
            if reply.get("id") == call_id:
                if "error" in reply:
                    raise CdpError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            self.events.append(reply)

    def browser_call(self, method: str, **params: Any) -> dict[str, Any]:
        saved, self.session = self.session, None
        try:
            return self.call(method, **params)
        finally:
            self.session = saved

    # ----------------------------------------------------------------- page
    def open(self, url: str) -> None:
        targets = self.browser_call("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        attached = self.browser_call(
            "Target.attachToTarget", targetId=page["targetId"], flatten=True
        )
        self.session = attached["sessionId"]
        self.call("Runtime.enable")
        self.call("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete'")

    def js(self, expression: str) -> Any:
        """The value of ``expression`` in the page (promises awaited); page errors raise."""
        result = self.call(
            "Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True
        )
        if "exceptionDetails" in result:
            raise CdpError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout_s: float = 30) -> Any:
        deadline = time.monotonic() + timeout_s
        while True:
            value = self.js(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise CdpError(f"timed out waiting for {expression}; errors: {self.errors()}")
            time.sleep(0.1)  # polling a condition, not waiting for an order of events

    def errors(self) -> list[str]:
        """Exceptions the page threw (Runtime.exceptionThrown events seen so far)."""
        return [
            str(e["params"]["exceptionDetails"])
            for e in self.events
            if e.get("method") == "Runtime.exceptionThrown"
        ]

    def screenshot(self, path: Path) -> None:
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(data["data"]))

    def close(self) -> None:
        with contextlib.suppress(CdpError, OSError):
            self.browser_call("Browser.close")
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        os.close(self._to_chrome)
        os.close(self._from_chrome)


def _above_nine(fd: int) -> int:
    high = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
    os.close(fd)
    return high
