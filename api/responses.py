"""A Response rendered by msgspec (FastAPI cannot return msgspec Structs itself)."""

from __future__ import annotations

from typing import Any

import msgspec
from starlette.responses import Response

_encode = msgspec.json.Encoder().encode


class MsgspecJSONResponse(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return _encode(content)
