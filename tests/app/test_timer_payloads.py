"""A request's payload as the stored timer gets it: none, text, binary, or a 422 naming
the field and the rule (``app.timer_requests.to_new_timers``, each form in a batch)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from app.timer_requests import IdMaker, InvalidBatchError, RequestLimits, to_new_timers

NOW_MS = 1_700_000_000_000
LIMITS = RequestLimits(max_payload_bytes=8)


@dataclass
class Request:
    topic: str = "orders"
    id: str | None = "o1"
    deliver_at_ms: int | None = NOW_MS + 1000
    delay_ms: int | None = None
    payload: str | None = None
    payload_b64: bytes | None = None
    headers: dict[str, str] | None = None


def stored(*reqs: Request) -> list[tuple[bytes, bool]]:
    timers = to_new_timers(list(reqs), NOW_MS, IdMaker(), LIMITS)
    return [(t.payload, t.binary) for t in timers]


def test_each_payload_form_is_stored_as_given() -> None:
    assert stored(
        Request(id="none"),
        Request(id="text", payload="hé"),
        Request(id="empty", payload=""),
        Request(id="binary", payload_b64=b"\x00\xff"),
    ) == [(b"", False), ("hé".encode(), False), (b"", False), (b"\x00\xff", True)]


@pytest.mark.parametrize(
    ("request_", "field", "rule"),
    [
        (Request(payload="x", payload_b64=b"x"), "timers[1].payload", "not both"),
        (Request(payload="123456789"), "timers[1].payload", "at most 8 bytes"),
        (Request(payload_b64=b"123456789"), "timers[1].payload_b64", "at most 8 bytes"),
        (Request(payload="\ud800"), "timers[1].payload", "UTF-8"),
    ],
)
def test_a_bad_payload_is_refused_naming_the_field(
    request_: Request, field: str, rule: str
) -> None:
    with pytest.raises(InvalidBatchError) as info:
        stored(Request(id="fine"), request_)
    assert info.value.field == field
    assert rule in info.value.message
