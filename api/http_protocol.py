"""The HTTP/1.1 protocol the server runs: uvicorn's httptools protocol, with JSON errors.

``timerstore serve`` names its parser and loop (``api.server.uvicorn_options``): httptools
(the C parser, llhttp) and uvloop. Measured in issue 36, they lift the floor of every
request (``/healthz`` 1,963 -> 3,315/s in one hour), where the pure-Python h11 and the
asyncio loop were picked or not depending on what happened to be installed.

A request the parser refuses never reaches the app, so uvicorn answers it itself: a 400
with ``text/plain`` "Invalid HTTP request received." (h11: a 400 with an empty body). Here
each gets the error shape of every other 4xx (``{"error": {"code", "message", "field"?}}``)
naming what was wrong, as llhttp reports it: a byte outside ASCII in the path ("Invalid
char in url path"), a bad method, a header line that is not ``name: value``. The request
head (request line and headers) is bounded too: llhttp has no limit of its own, so a
1 MiB header was read whole and served; past ``MAX_REQUEST_HEAD_BYTES`` the answer is a
431. Either way the connection is closed after the answer, as uvicorn does: the rest of
its bytes cannot be trusted to start a request.

The plain single ``POST /v1/timers`` is answered here, not by the app (issue 36, part 3;
``api.hot_routes.ScheduleOneAnswers`` says which request that is): where uvicorn would
start the request's ASGI task (``_start_asgi_task``), the request is held until its body
is in, submitted to the group commit, and answered by a callback of its future in one
write, finished as uvicorn's ``RequestResponseCycle.send`` finishes an answer (keep-alive,
the next pipelined request). That hooks uvicorn's internals, as written for uvicorn
0.54.0 (requirements.lock); tests/api/test_schedule_one_protocol.py pins the behaviour.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import httptools
import msgspec
from uvicorn._types import ASGI3Application
from uvicorn.config import Config
from uvicorn.protocols.http.flow_control import HIGH_WATER_LIMIT
from uvicorn.protocols.http.httptools_impl import (
    STATUS_LINE,
    HttpToolsProtocol,
    RequestResponseCycle,
)
from uvicorn.protocols.utils import get_client_addr, get_path_with_query_string
from uvicorn.server import ServerState

from api.hot_routes import Answer, Headers, ScheduleOneAnswers
from api.schemas import ErrorBody, ErrorDetail, given

MAX_REQUEST_HEAD_BYTES = 64 << 10  # request line and headers; h11's own limit was 16 KiB
NOT_HTTP = "not a valid HTTP/1.1 request"


class JsonErrorsHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol whose own answers (parse errors) are JSON errors."""

    _head_bytes = 0  # bytes received while a request head is incomplete
    _in_head = True  # between the end of one request's head and the next one's start: False
    _schedule_one_cycle: RequestResponseCycle | None = None  # its body is still arriving

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        # the app's single-schedule answers (``api.app.create_app``); None for other apps
        state = getattr(config.app, "state", None)
        self._schedule_one: ScheduleOneAnswers | None = getattr(state, "schedule_one_answers", None)

    def data_received(self, data: bytes) -> None:
        if self._in_head:
            self._head_bytes += len(data)
        super().data_received(data)  # calls send_400_response on a parse error
        if self._in_head and self._head_bytes > MAX_REQUEST_HEAD_BYTES:
            message = f"the request line and headers must be at most {MAX_REQUEST_HEAD_BYTES} B"
            self.send_json_error(431, ErrorDetail("headers_too_large", message, "headers"))

    def on_headers_complete(self) -> None:
        self._in_head, self._head_bytes = False, 0
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._in_head = True
        super().on_message_complete()
        cycle = self._schedule_one_cycle
        if cycle is not None and cycle is self.cycle and not cycle.more_body:
            self._schedule_one_cycle = None
            self._answer_schedule_one(cycle)

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: ASGI3Application) -> None:
        """Start the request's answer: the plain ``POST /v1/timers`` here, once its body
        is in (``api.hot_routes.ScheduleOneAnswers``), every other request by the app."""
        answers, scope = self._schedule_one, cycle.scope
        if (
            answers is not None
            and app is self.app  # not uvicorn's 503 over its concurrency limit
            # the body is held whole: up to what the reads hold before uvicorn pauses them
            and answers.takes(
                scope["method"], scope["raw_path"], scope["headers"], HIGH_WATER_LIMIT
            )
        ):
            if cycle.more_body:
                self._schedule_one_cycle = cycle
            else:
                self._answer_schedule_one(cycle)
            return
        super()._start_asgi_task(cycle, app)

    def _answer_schedule_one(self, cycle: RequestResponseCycle) -> None:
        """Submit the schedule and answer when its group is stored, without an ASGI task
        (issue 36, part 3); a request that is not the plain case goes to the app."""
        answers = self._schedule_one
        assert answers is not None
        pending = answers.submit(cycle.scope["headers"], bytes(cycle.body))
        if pending is None:
            super()._start_asgi_task(cycle, self.app)
            return
        pending.future.add_done_callback(
            lambda _: self._send_answer(cycle, answers.answer(pending))
        )

    def _send_answer(self, cycle: RequestResponseCycle, answer: Answer) -> None:
        """What ``RequestResponseCycle.send`` does for a whole answer, in one write."""
        if cycle.disconnected or cycle.response_complete or self.transport.is_closing():
            return  # the client left (or a parse error after it closes the connection): the
            # timer is stored all the same, as on the ASGI route
        status, headers, body = answer
        if cycle.access_log:
            scope = cycle.scope
            self.access_logger.info(
                '%s - "%s %s HTTP/%s" %d',
                get_client_addr(scope),
                scope["method"],
                get_path_with_query_string(scope),
                scope["http_version"],
                status,
            )
        self.transport.write(self._answer_bytes(status, headers, body, cycle.keep_alive))
        cycle.response_started = cycle.response_complete = True
        cycle.message_event.set()
        if not cycle.keep_alive:
            self.transport.close()
        self.on_response_complete()

    def _answer_bytes(self, status: int, headers: Headers, body: bytes, keep_alive: bool) -> bytes:
        """Status line, the server's default headers, ``headers``, then ``body``."""
        head = [STATUS_LINE[status]]
        for name, value in (*self.server_state.default_headers, *headers):
            head.extend([name, b": ", value, b"\r\n"])
        if not keep_alive:
            head.append(b"connection: close\r\n")
        head.extend([b"\r\n", body])
        return b"".join(head)

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to what the parser refused: the parser's reason, as JSON."""
        error = sys.exc_info()[1]  # called from the parse error's handler in data_received
        reason = str(error) if error is not None and str(error) else msg.rstrip(".")
        field = "path" if isinstance(error, httptools.HttpParserInvalidURLError) else None
        detail = ErrorDetail("bad_request", f"{NOT_HTTP}: {reason}", given(field))
        self.send_json_error(400, detail)

    def send_json_error(self, status: int, detail: ErrorDetail) -> None:
        """Answer ``status`` with the error shape and close the connection."""
        if self.transport.is_closing():
            return
        body = msgspec.json.encode(ErrorBody(detail))
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode("ascii")),
        ]
        self.transport.write(self._answer_bytes(status, headers, body, keep_alive=False))
        self.transport.close()
