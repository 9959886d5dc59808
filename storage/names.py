"""The one rule for topic and id names, shared by every store, the API and the pipeline.

A name is 1 to 128 bytes of ``[A-Za-z0-9._:-]``. The RocksDB layout relies on it (0x00
never occurs inside a name, so it can separate topic and id; see ``storage.rocks.keys``),
and the API's schemas use ``NAME_PATTERN`` and ``NAME_MAX_BYTES`` for their 422s.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from storage.errors import InvalidInputError

NAME_MAX_BYTES = 128
NAME_CHARS = "A-Za-z0-9._:\\-"
NAME_PATTERN = f"^[{NAME_CHARS}]{{1,{NAME_MAX_BYTES}}}$"  # for JSON Schema / pydantic

_valid_name = re.compile(f"[{NAME_CHARS}]{{1,{NAME_MAX_BYTES}}}").fullmatch


def validate_name(field: str, value: str) -> bytes:
    """Return ``value`` as ASCII bytes, or raise naming ``field`` and the rule it broke."""
    if type(value) is str and _valid_name(value):  # the hot path: one C call
        return value.encode()
    if not isinstance(value, str):
        raise InvalidInputError(f"{field} must be a string", field=field)
    raw = value.encode("utf-8", "surrogatepass")
    if not 1 <= len(raw) <= NAME_MAX_BYTES:
        raise InvalidInputError(
            f"{field} must be 1 to {NAME_MAX_BYTES} bytes, got {len(raw)}", field=field
        )
    raise InvalidInputError(
        f"{field} may contain only A-Z a-z 0-9 . _ : - (got {value!r})", field=field
    )


def validate_idents(pairs: Iterable[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    """Validate many (topic, id) pairs; topics repeat, so each is checked once per call."""
    topics: dict[str, bytes] = {}
    out = []
    for topic, timer_id in pairs:
        topic_b = topics.get(topic)
        if topic_b is None:
            topic_b = topics[topic] = validate_name("topic", topic)
        out.append((topic_b, validate_name("id", timer_id)))
    return out
