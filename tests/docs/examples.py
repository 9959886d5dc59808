"""Reading the runnable examples out of a Markdown page (the convention is in
tests/docs/test_examples.py and docs/development.md)."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

FENCE = re.compile(r"^```(\w*)[ \t]*(.*)$")
EXPECT = re.compile(r"^#\s*->\s*(\d{3})\s*(.*)$")
SHAPE_MORE = re.compile(r"^#\s{2,}(\S.*)$")  # a shape continued on the next comment line
ANY = "\u2026any"
MORE = "\u2026more"


@dataclass
class Call:
    """One curl command of a sh block and the answer the text shows for it."""

    command: str
    status: int | None = None  # None: any 2xx
    shape: str = ""


@dataclass
class Block:
    language: str  # "sh" or "python"
    line: int  # of the opening fence, 1-based
    code: str
    calls: list[Call] = field(default_factory=list)


def runnable_blocks(markdown: str) -> list[Block]:
    """Every ```sh and ```python block not marked ``no-run``, in page order."""
    blocks: list[Block] = []
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        opened = FENCE.match(lines[i].strip())
        if not opened or not (opened.group(1) or opened.group(2)):
            i += 1
            continue
        language, info = opened.group(1), opened.group(2)
        end = i + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        indent = len(lines[i]) - len(lines[i].lstrip())
        code = "\n".join(line[indent:] for line in lines[i + 1 : end]) + "\n"
        if language in ("sh", "python") and "no-run" not in info.split():
            block = Block(language, i + 1, code)
            if language == "sh":
                block.calls = curl_calls(code)
            blocks.append(block)
        i = end + 1
    return blocks


def curl_calls(code: str) -> list[Call]:
    """The curl commands of a sh block, each with the ``# -> STATUS shape`` after it."""
    calls: list[Call] = []
    pending: list[str] = []
    in_shape = False
    for line in code.splitlines():
        stripped = line.strip()
        if pending:
            pending.append(line)
            if _complete(pending):
                _add_command(calls, pending)
                pending = []
            continue
        expected = EXPECT.match(stripped)
        if expected and calls:
            calls[-1].status = int(expected.group(1))
            calls[-1].shape = expected.group(2)
            in_shape = True
            continue
        more = SHAPE_MORE.match(stripped)
        if in_shape and more and calls:
            calls[-1].shape += more.group(1)
            continue
        in_shape = False
        if not stripped or stripped.startswith("#"):
            continue
        pending = [line]
        if _complete(pending):
            _add_command(calls, pending)
            pending = []
    assert not pending, f"an unfinished command: {pending}"
    return calls


def _complete(lines: list[str]) -> bool:
    text = "\n".join(lines)
    if text.rstrip().endswith("\\"):
        return False
    try:
        shlex.split(text, comments=True)
    except ValueError:  # an open quote: the command goes on
        return False
    return True


def _add_command(calls: list[Call], lines: list[str]) -> None:
    text = "\n".join(lines)
    words = shlex.split(text, comments=True)
    if "curl" in words:
        calls.append(Call(text))


def parse_shape(text: str) -> Any:
    """The JSON a comment shows, with ``...`` for any value, more keys or more items."""
    text = re.sub(r",\s*\.\.\.\s*}", f', "{MORE}": 0}}', text)
    text = re.sub(r"{\s*\.\.\.\s*}", f'{{"{MORE}": 0}}', text)
    text = re.sub(r",\s*\.\.\.\s*]", f', "{MORE}"]', text)
    text = re.sub(r"\[\s*\.\.\.\s*]", f'["{MORE}"]', text)
    text = re.sub(r":\s*\.\.\.", f': "{ANY}"', text)
    return json.loads(text)


def mismatch(expected: Any, actual: Any, path: str = "$") -> str | None:
    """Where ``actual`` departs from the shape ``expected`` (None: it matches)."""
    if expected == ANY:
        return None
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return f"{path}: an object was shown, {actual!r} came"
        keys = [k for k in expected if k != MORE]
        missing = [k for k in keys if k not in actual]
        extra = [] if MORE in expected else [k for k in actual if k not in expected]
        if missing or extra:
            return f"{path}: keys missing {missing}, not shown {extra}"
        found = (mismatch(expected[k], actual[k], f"{path}.{k}") for k in keys)
        return next((m for m in found if m), None)
    if isinstance(expected, list):
        if not isinstance(actual, list):
            return f"{path}: an array was shown, {actual!r} came"
        items = [e for e in expected if e != MORE]
        if len(actual) < len(items) or (MORE not in expected and len(actual) != len(items)):
            return f"{path}: {len(items)} items shown, {len(actual)} came"
        pairs = enumerate(zip(items, actual[: len(items)], strict=True))
        found = (mismatch(e, a, f"{path}[{i}]") for i, (e, a) in pairs)
        return next((m for m in found if m), None)
    return None if expected == actual else f"{path}: {expected!r} shown, {actual!r} came"
