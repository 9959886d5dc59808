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
# topic, 0x00, id: how storage.rocks.keys joins the two (0x00 is in no name)
PAIR_SEPARATOR = "\x00"
_valid_pair_lines = re.compile(
    f"(?:[{NAME_CHARS}]{{1,{NAME_MAX_BYTES}}}\x00[{NAME_CHARS}]{{1,{NAME_MAX_BYTES}}}\n)+"
).fullmatch


def validate_name(field: str, value: str) -> bytes:
    """Return ``value`` as ASCII bytes, or raise naming ``field`` and the rule it broke."""
    if type(value) is str and _valid_name(value):  # the hot path: one C call
        return value.encode()
    raise InvalidInputError(name_problem(field, value), field=field)


def name_problem(field: str, value: object) -> str:
    """The rule a name that is not valid broke, in the one wording of every check (the
    body's, the path's and the query's)."""
    if not isinstance(value, str):
        return f"{field} must be a string"
    raw = value.encode("utf-8", "surrogatepass")
    if not 1 <= len(raw) <= NAME_MAX_BYTES:
        return f"{field} must be 1 to {NAME_MAX_BYTES} bytes, got {len(raw)}"
    return f"{field} may contain only A-Z a-z 0-9 . _ : - (got {value!r})"


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


def all_valid_idents(idents: list[bytes]) -> bool:
    """Whether each is ``topic | 0x00 | id`` with both names valid, in one regex call over
    the joined idents (a bulk ingest's hot path; ``validate_name`` then names the rule)."""
    try:
        joined = b"\n".join(idents).decode("ascii") + "\n"
    except UnicodeDecodeError:
        return False
    if not idents:
        return True
    return _valid_pair_lines(joined) is not None and joined.count("\n") == len(idents)


def validate_idents(topics: list[str], ids: list[str]) -> list[bytes]:
    """Validate a batch's names; return each pair as ``topic | 0x00 | id`` bytes (the
    identity ``storage.rocks.keys`` builds its keys from).

    The hot path is a few C calls for the whole batch: four slice assignments and one
    join build ``topic 0x00 id \\n ...``, one regex checks it, one encode and one split
    cut it (0.30 -> 0.17 us a timer, docs/perf.md). No name may hold 0x00 or a newline,
    so each line must be exactly one valid name, a 0x00 and another valid name, and the
    count of lines must be the count of pairs (a newline inside an id could otherwise
    pass as two pairs). ``str.join`` refuses anything but strings. When the check fails,
    each name is checked on its own, ids first, so the error names the rule it broke.
    """
    count = len(ids)
    parts = [PAIR_SEPARATOR] * (4 * count)
    parts[::4], parts[2::4], parts[3::4] = topics, ids, ["\n"] * count
    try:
        joined = "".join(parts)
    except TypeError:  # a name that is not a string
        joined = ""
    if count and _valid_pair_lines(joined) is not None and joined.count("\n") == count:
        idents = joined.encode().split(b"\n")
        idents.pop()  # the empty piece after the last newline
        return idents
    ids_b = [validate_name("id", i) for i in ids]
    separator = PAIR_SEPARATOR.encode()
    return [validate_name("topic", t) + separator + i for t, i in zip(topics, ids_b, strict=True)]
