"""The one rule for topic and id names, shared by every store, the API and the pipeline.

A name is 1 to 128 bytes of ``[A-Za-z0-9._:-]``. The RocksDB layout relies on it (0x00
never occurs inside a name, so it can separate topic and id; see ``storage.rocks.keys``),
and the API's schemas use ``NAME_PATTERN`` and ``NAME_MAX_BYTES`` for their 422s.
"""

from __future__ import annotations

import re

from storage.errors import InvalidInputError

NAME_MAX_BYTES = 128
NAME_CHARS = "A-Za-z0-9._:\\-"
NAME_PATTERN = f"^[{NAME_CHARS}]{{1,{NAME_MAX_BYTES}}}$"  # for JSON Schema / pydantic

_valid_name = re.compile(f"[{NAME_CHARS}]{{1,{NAME_MAX_BYTES}}}").fullmatch
_valid_lines = re.compile(f"(?:[{NAME_CHARS}]{{1,{NAME_MAX_BYTES}}}\n)+").fullmatch


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


def _joined_if_valid(names: list[str]) -> str | None:
    """The names, each followed by a newline (a byte no name may hold), when every one
    follows the rule: one regex call for a whole batch. A name holding a newline would
    pass as two lines, so the count of lines must be the count of names."""
    try:
        joined = "\n".join(names) + "\n"
    except TypeError:  # a name that is not a string
        return None
    if _valid_lines(joined) is None or joined.count("\n") != len(names):
        return None
    return joined


def all_valid(names: list[str]) -> bool:
    """Whether every name follows the rule, in one regex call over the joined names.

    A batch's hot path: ``validate_name`` then says which name broke the rule and how.
    """
    return not names or _joined_if_valid(names) is not None


def validate_idents(topics: list[str], ids: list[str]) -> tuple[list[bytes], list[bytes]]:
    """Validate a batch's names; return them as bytes.

    The hot path checks every id with one regex call over the joined ids and encodes them
    with one call; when that fails, each name is checked on its own so the error names
    the rule it broke. Topics repeat, so each distinct topic is checked once.
    """
    joined = _joined_if_valid(ids) if ids else None
    if joined is not None:
        ids_b = joined.encode().split(b"\n")
        ids_b.pop()  # the empty piece after the last newline
    else:
        ids_b = [validate_name("id", i) for i in ids]
    seen: dict[str, bytes] = {}
    topics_b = []
    for topic in topics:
        topic_b = seen.get(topic)
        if topic_b is None:
            topic_b = seen[topic] = validate_name("topic", topic)
        topics_b.append(topic_b)
    return topics_b, ids_b
