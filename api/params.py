"""Path and query parameters of the REST API, each with the rule the server enforces.

FastAPI validates them (a 422 naming the parameter) and writes the same rule into the
OpenAPI document: names have the storage name pattern and length, integers explicit
minimum and maximum (so ``from_ms=10**40`` is a 422, never an overflow deep in the
store). Bounds that come from the settings (``limit``, ``wait_ms``) are checked by the
routes and written into the document by ``api.docs``, so the document states this
server's real limits.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query

from api.schemas import MAX_OFFSET, NAME_DESCRIPTION
from app.topics import TopicOrder
from storage.names import NAME_MAX_BYTES, NAME_PATTERN
from storage.rules import MAX_TIME_MS

# A cursor is standard base64url with padding: the position after which a listing goes on,
# with a check (storage.cursors), so one the server did not issue is a 422.
CURSOR_PATTERN = "^(?:[A-Za-z0-9_-]{4})*(?:[A-Za-z0-9_-]{2}==|[A-Za-z0-9_-]{3}=)?$"
CURSOR_MAX_LENGTH = 1024
_NAME = {"pattern": NAME_PATTERN, "min_length": 1, "max_length": NAME_MAX_BYTES}

TopicPath = Annotated[str, Path(**_NAME, description=f"the topic: {NAME_DESCRIPTION}")]
TimerIdPath = Annotated[
    str, Path(alias="id", **_NAME, description=f"the timer's id: {NAME_DESCRIPTION}")
]
GroupPath = Annotated[str, Path(**_NAME, description=f"the consumer group: {NAME_DESCRIPTION}")]
TopicFilter = Annotated[
    str | None, Query(**_NAME, description=f"only this topic ({NAME_DESCRIPTION})")
]
FromMs = Annotated[
    int, Query(ge=0, le=MAX_TIME_MS, description="due at or after (epoch ms)", examples=[0])
]
ToMs = Annotated[int | None, Query(ge=0, le=MAX_TIME_MS, description="due at or before (epoch ms)")]
PageLimit = Annotated[
    int,
    Query(
        ge=1,
        description="page size (at most the server's max_page_limit); a page also ends "
        "once its payloads and headers reach the server's max_page_bytes (16 MiB)",
    ),
]
Cursor = Annotated[
    str | None,
    Query(
        pattern=CURSOR_PATTERN,
        min_length=4,
        max_length=CURSOR_MAX_LENGTH,
        description="next_cursor of the previous page, as given (a cursor the server did "
        "not issue is a 422)",
    ),
]
TopicOrderParam = Annotated[
    TopicOrder,
    Query(description="topic: by name; pending: most pending first (then by name)"),
]
Offset = Annotated[int, Query(ge=0, le=MAX_OFFSET, description="first offset to read")]
OptionalOffset = Annotated[
    int | None,
    Query(
        ge=0,
        le=MAX_OFFSET,
        description="first offset to read (default 0, or the group's offset)",
    ),
]
GroupFilter = Annotated[
    str | None,
    Query(**_NAME, description=f"read from this consumer group's committed offset "
          f"({NAME_DESCRIPTION}; an offset given as well wins)"),
]  # fmt: skip
WaitMs = Annotated[
    int,
    Query(ge=0, description="long-poll: wait up to this long for a first message "
          "(at most the server's max_wait_ms)"),
]  # fmt: skip

# Parameters whose maximum is a setting: (parameter name, settings.limits field).
SETTING_MAXIMA = (("limit", "max_page_limit"), ("wait_ms", "max_wait_ms"))
