"""Logging of the running service: plain text (default) or one JSON object per line.

``configure_logging`` is called once by the entry point (``timerstore serve``); it puts
one handler on the root logger, so every logger (ours, uvicorn's error and access logs,
APScheduler's) writes in the same format. uvicorn is then started with
``log_config=None`` so it adds no handler of its own.

A JSON line has ``ts`` (UTC, ISO 8601 with milliseconds), ``level``, ``logger``,
``event`` and ``message``, plus every field the call passed with ``extra=`` (``topic``,
``timer_id``, ``count``, ``store``, ...). Lines without an explicit event get ``log``;
uvicorn's access lines get ``event: "access"`` and ``client``, ``method``, ``path``,
``http_version`` and ``status`` fields. An exception adds ``exc_type`` and ``exc``.

Lines of the events written per failed batch (``delivery_failed``, ``dead_letter``,
``sink_error``) or write (``disk_full``) are limited to ``FLOOD_LINES_PER_S`` a second
each (``FloodLimit``): a webhook route answers timer by timer, so 2,000 timers due to
a route that was down wrote 2,603 lines in a few seconds, and a million would write
millions. The first line let through after a stretch of dropped ones says how many
(``suppressed``), and the stats snapshot (every ``housekeeping.stats_snapshot_interval_ms``)
writes one ``log_suppressed`` line with any count no line has told yet, so a flood that
stops still says how many it dropped at its end; the exact totals are in ``/metrics``.

Both formats hide a URL's credentials in the whole line (``redact``): the password of
``scheme://user:password@host`` and the query string, which is where a webhook's or a
Redis URL's token sits. A route's URL is logged when it changes and may hold either.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import IO, Any

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# attributes every LogRecord has: anything else on a record came from ``extra=``
_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}
_STANDARD.add("color_message")  # uvicorn's ANSI-coloured copy of the message
_ACCESS_FIELDS = ("client", "method", "path", "http_version", "status")
# in a URL (scheme://...): the password of its userinfo, and its query string; neither
# pattern crosses a space, a quote or a backslash, so a JSON line stays valid JSON
_URL_PASSWORD = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/?#@:\"'\\]*:)[^\s/?#@\"'\\]+@")
_URL_QUERY = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://[^\s?#\"'\\]*)\?[^\s#\"'\\)]+")
REDACTED = "***"
FLOOD_EVENTS = frozenset({"delivery_failed", "dead_letter", "sink_error", "disk_full"})
FLOOD_LINES_PER_S = 20  # per event
log = logging.getLogger(__name__)


def redact(line: str) -> str:
    """``line`` with every URL's password and query string replaced by ``***``."""
    if "://" not in line:
        return line
    line = _URL_PASSWORD.sub(rf"\1{REDACTED}@", line)
    return _URL_QUERY.sub(rf"\1?{REDACTED}", line)


class FloodLimit(logging.Filter):
    """At most ``per_s`` lines a second of each event in ``FLOOD_EVENTS``; the first line
    let through after dropped ones carries their count (``suppressed``, and in its text)."""

    def __init__(
        self, per_s: int = FLOOD_LINES_PER_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self._per_s, self._clock = per_s, clock
        self._seen: dict[str, tuple[int, int, int]] = {}  # event -> (second, passed, dropped)
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        event = getattr(record, "event", None)
        if not isinstance(event, str) or event not in FLOOD_EVENTS:
            return True
        second = int(self._clock())
        with self._lock:
            start, passed, dropped = self._seen.get(event, (second, 0, 0))
            if second != start:
                start, passed = second, 0
            if passed >= self._per_s:
                self._seen[event] = (start, passed, dropped + 1)
                return False
            self._seen[event] = (start, passed + 1, 0)
        if dropped:
            record.suppressed = dropped
            record.msg = f"{record.msg} ({dropped} earlier {event} lines suppressed)"
        return True

    def report_suppressed(self) -> None:
        """One ``log_suppressed`` line per event with dropped lines no line has reported
        yet: a flood that stopped would otherwise never say how many it dropped at its
        end. The count starts again from 0; the second's allowance is kept."""
        with self._lock:
            counts = {e: d for e, (_, _, d) in self._seen.items() if d}
            for event in counts:
                start, passed, _ = self._seen[event]
                self._seen[event] = (start, passed, 0)
        for event, dropped in sorted(counts.items()):
            log.warning(
                "%d %s lines suppressed (totals: /metrics)",
                dropped,
                event,
                extra={"event": "log_suppressed", "suppressed_event": event, "suppressed": dropped},
            )


def report_suppressed_lines() -> None:
    """``FloodLimit.report_suppressed`` of every handler on the root logger (the one
    ``configure_logging`` set); called by the periodic stats snapshot."""
    for handler in logging.getLogger().handlers:
        for flood in handler.filters:
            if isinstance(flood, FloodLimit):
                flood.report_suppressed()


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": "log",
            "message": record.getMessage(),
        }
        if record.name == "uvicorn.access" and isinstance(record.args, tuple):
            line["event"] = "access"
            line.update(zip(_ACCESS_FIELDS, record.args, strict=False))
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                line[key] = value
        if record.exc_info and record.exc_info[0] is not None:
            line["exc_type"] = record.exc_info[0].__name__
            line["exc"] = self.formatException(record.exc_info)
        return redact(json.dumps(line, default=str, ensure_ascii=False))


def configure_logging(log_format: str, level: str, stream: IO[str] | None = None) -> None:
    """One root handler in ``log_format`` ("text" or "json") at ``level`` for every logger."""
    handler = logging.StreamHandler(stream or sys.stderr)
    formatter = JsonFormatter() if log_format == "json" else TextFormatter(TEXT_FORMAT)
    handler.setFormatter(formatter)
    handler.addFilter(FloodLimit())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
        logger.setLevel(logging.NOTSET)  # the root's level (uvicorn.Config may set its own)
    logging.getLogger("apscheduler").setLevel(logging.WARNING)  # one line per job run
    # httpx logs each request at info (its URL included): one line per request of a client
    # in the process (the webhook sender used it until app.engine.http11); a failure is
    # our own delivery_failed line
    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel(logging.WARNING)
