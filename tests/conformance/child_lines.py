"""Reading a child process's stdout line by line without ever blocking past a deadline.

``pipe.readline()`` blocks until the child writes a newline or exits, so a child that
hangs silently would hang the test with it. ``ChildLines`` waits on the pipe's descriptor
with ``select`` for at most the time left, and reads raw bytes with ``os.read`` (never
through the file object, whose buffer ``select`` cannot see).
"""

from __future__ import annotations

import os
import select
import subprocess
import time
from typing import IO, Any


class ChildLines:
    """Whole lines from a child's stdout pipe; a torn last line is never returned."""

    def __init__(self, pipe: IO[Any] | None) -> None:
        assert pipe is not None, "the child was started without stdout=subprocess.PIPE"
        self._fd = pipe.fileno()
        self._buffer = b""
        self.at_end = False  # the child closed its end of the pipe

    def next_line(self, deadline: float) -> str | None:
        """The next whole line without its newline; None at end of file or at ``deadline``
        (monotonic clock), whichever comes first."""
        while b"\n" not in self._buffer:
            if self.at_end or not self._fill(deadline):
                return None
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode()

    def rest(self, deadline: float) -> list[str]:
        """Every whole line until the child closes the pipe; fails at ``deadline``."""
        lines = []
        while (line := self.next_line(deadline)) is not None:
            lines.append(line)
        if not self.at_end:
            raise AssertionError("the child's stdout stayed open past the deadline")
        return lines

    def _fill(self, deadline: float) -> bool:
        """Read what the pipe has once it is readable; False if the deadline came first."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        readable, _, _ = select.select([self._fd], [], [], remaining)
        if not readable:
            return False
        chunk = os.read(self._fd, 1 << 16)
        if chunk:
            self._buffer += chunk
        else:
            self.at_end = True
        return True


def stop_child(child: subprocess.Popen[Any], wait_s: float = 10) -> None:
    """Kill ``child`` if it is still running, then reap it: for a ``finally`` block, so a
    failing test never leaves the process behind."""
    if child.poll() is None:
        child.kill()
    child.wait(wait_s)
