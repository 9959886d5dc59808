"""A Response rendered by msgspec (FastAPI cannot return msgspec Structs itself).

It subclasses JSONResponse so that FastAPI's document leaves a route's response schema
to the route's ``responses`` (a plain ``$ref``) instead of claiming ``type: string``.
"""

from __future__ import annotations

from typing import Any

import msgspec
from starlette.responses import JSONResponse

_encode = msgspec.json.Encoder().encode


class MsgspecJSONResponse(JSONResponse):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return _encode(content)
