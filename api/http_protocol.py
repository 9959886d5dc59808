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
"""

from __future__ import annotations

import sys

import httptools
import msgspec
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from api.schemas import ErrorBody, ErrorDetail, given

MAX_REQUEST_HEAD_BYTES = 64 << 10  # request line and headers; h11's own limit was 16 KiB
NOT_HTTP = "not a valid HTTP/1.1 request"


class JsonErrorsHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol whose own answers (parse errors) are JSON errors."""

    _head_bytes = 0  # bytes received while a request head is incomplete
    _in_head = True  # between the end of one request's head and the next one's start: False

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
        head = [STATUS_LINE[status]]
        for name, value in self.server_state.default_headers:
            head.extend([name, b": ", value, b"\r\n"])
        head.extend(
            [
                b"content-type: application/json\r\n",
                b"content-length: " + str(len(body)).encode("ascii") + b"\r\n",
                b"connection: close\r\n",
                b"\r\n",
                body,
            ]
        )
        self.transport.write(b"".join(head))
        self.transport.close()
