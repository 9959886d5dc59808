"""Each operation as a ``Call``: the HTTP request to send and how to read its answer.

The sync and async clients share these, so they differ only in how they send. Bodies go
as msgpack (binary payloads travel as bin, and it is the server's fast path); answers
are JSON, decoded straight into the Structs of ``client.models``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
import msgspec

from client.errors import error_from
from client.models import (
    BatchCancelled,
    BatchScheduled,
    Cancelled,
    CancelOutcome,
    ClusterView,
    GroupList,
    GroupOffset,
    MessagePage,
    Purged,
    Replayed,
    Scheduled,
    Timer,
    TimerPage,
    TimerSpec,
    TopicList,
)

T = TypeVar("T")
Payload = str | bytes | bytearray | memoryview  # text, or binary
_ENCODER = msgspec.msgpack.Encoder()


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request; ``read(status, body)`` turns its answer into a value or raises."""

    method: str
    path: str
    read: Callable[[int, bytes], T]
    params: dict[str, Any] = field(default_factory=dict)
    body: bytes | None = None
    wait_ms: int = 0  # a long-poll: the read timeout must outlast it
    content_type: str = "application/msgpack"  # of ``body``

    @property
    def headers(self) -> dict[str, str]:
        return {"Content-Type": self.content_type} if self.body is not None else {}

    def at(self, base_url: str) -> Call[T]:
        """This call sent to ``base_url`` instead of the client's (an absolute URL)."""
        return replace(self, path=base_url.rstrip("/") + self.path)


def http_options(api_key: str | None, timeout_s: float) -> dict[str, Any]:
    """The httpx client options both clients use (the API key as a bearer token)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return {"headers": headers, "timeout": timeout_s}


# The pool of long-polls (consume with wait_ms > 0) has no cap. Each poll holds its
# connection for up to wait_ms: in httpx's default pool (100 connections) 100 polls would
# leave none for any other call, and a schedule would fail with PoolTimeout. So the
# clients keep long-polls in a pool of their own; there are as many as polls are running.
LONG_POLL_LIMITS = httpx.Limits(max_connections=None, max_keepalive_connections=None)


# A server closes a keep-alive connection that stayed idle past its timeout (uvicorn: 5 s);
# a request sent on it at that moment ends with RemoteProtocolError and no answer. A
# read is sent once more, on a new connection; a write is not (its effect is unknown).
RESENDABLE_METHODS = frozenset({"GET", "HEAD"})


def resendable(call: Call[Any]) -> bool:
    """True when ``call``, ended by RemoteProtocolError, may be sent again."""
    return call.method in RESENDABLE_METHODS


def timeout_of(call: Call[Any], timeout_s: float) -> httpx.Timeout:
    """A long-poll may be silent for ``wait_ms``: the read timeout outlasts it."""
    return httpx.Timeout(timeout_s, read=timeout_s + call.wait_ms / 1000)


def _reader(kind: type[T], *ok: int) -> Callable[[int, bytes], T]:
    decoder = msgspec.json.Decoder(kind)

    def read(status: int, body: bytes) -> T:
        if status not in ok:
            raise error_from(status, body)
        return decoder.decode(body)

    return read


def segment(name: str) -> str:
    """A name as one path segment: dots escaped too, so that ``.`` or ``..`` (valid names)
    are not taken for dot-segments and removed from the path by URL normalization."""
    return quote(name, safe="").replace(".", "%2E")


def _timer_path(topic: str, timer_id: str) -> str:
    return f"/v1/timers/{segment(topic)}/{segment(timer_id)}"


def _given(**params: Any) -> dict[str, Any]:
    return {key: value for key, value in params.items() if value is not None}


# built once: a decoder per answer type
_read_timer = _reader(Timer, 200, 201)
_read_batch = _reader(BatchScheduled, 200)
_read_page = _reader(TimerPage, 200)
_read_messages = _reader(MessagePage, 200)
_read_topics = _reader(TopicList, 200)
_read_group = _reader(GroupOffset, 200)
_read_groups = _reader(GroupList, 200)
_read_replayed = _reader(Replayed, 200)
_read_purged = _reader(Purged, 200)
_read_cluster = _reader(ClusterView, 200)
_read_cancelled = _reader(BatchCancelled, 200)


def _read_scheduled(status: int, body: bytes) -> Scheduled:
    return Scheduled(timer=_read_timer(status, body), replaced=status == 200)


def schedule(spec: TimerSpec) -> Call[Scheduled]:
    return Call("POST", "/v1/timers", _read_scheduled, body=_ENCODER.encode(spec))


def schedule_many(specs: Sequence[TimerSpec]) -> Call[BatchScheduled]:
    body = _ENCODER.encode({"timers": list(specs)})
    return Call("POST", "/v1/timers/batch", _read_batch, body=body)


def cluster() -> Call[ClusterView]:
    return Call("GET", "/v1/cluster", _read_cluster)


def get(topic: str, timer_id: str) -> Call[Timer]:
    return Call("GET", _timer_path(topic, timer_id), _read_timer)


def _read_cancel(status: int, body: bytes) -> Cancelled:
    """204 is CANCELLED, the server's 409 TOO_LATE, and its 404 naming the field ``id``
    (no such timer) UNKNOWN; any other 404 (a wrong base URL, a proxy's page) raises: it
    says nothing about the timer."""
    if status == 204:
        return Cancelled(outcome=CancelOutcome.CANCELLED)
    error = error_from(status, body)
    if error.code == "not_found" and error.field == "id":
        return Cancelled(outcome=CancelOutcome.UNKNOWN)
    if error.code == "conflict":
        return Cancelled(outcome=CancelOutcome.TOO_LATE, state=error.state)
    raise error


def cancel(topic: str, timer_id: str) -> Call[Cancelled]:
    return Call("DELETE", _timer_path(topic, timer_id), _read_cancel)


def cancel_many(idents: Sequence[tuple[str, str]]) -> Call[BatchCancelled]:
    body = _ENCODER.encode({"timers": [{"topic": t, "id": i} for t, i in idents]})
    return Call("POST", "/v1/timers/cancel", _read_cancelled, body=body)


def list_pending(
    topic: str | None, from_ms: int, to_ms: int | None, limit: int, cursor: str | None
) -> Call[TimerPage]:
    params = _given(topic=topic, from_ms=from_ms, to_ms=to_ms, limit=limit, cursor=cursor)
    return Call("GET", "/v1/timers", _read_page, params=params)


def consume(
    topic: str, offset: int | None, group: str | None, limit: int, wait_ms: int
) -> Call[MessagePage]:
    path = f"/v1/topics/{segment(topic)}/messages"
    params = _given(offset=offset, group=group, limit=limit, wait_ms=wait_ms)
    return Call("GET", path, _read_messages, params=params, wait_ms=wait_ms)


def commit(topic: str, group: str, offset: int, force: bool) -> Call[GroupOffset]:
    path = f"/v1/topics/{segment(topic)}/groups/{segment(group)}/commit"
    body = msgspec.json.encode({"offset": offset, "force": force})
    return Call("POST", path, _read_group, body=body, content_type="application/json")


def groups(topic: str) -> Call[GroupList]:
    return Call("GET", f"/v1/topics/{segment(topic)}/groups", _read_groups)


def topics(order: str, limit: int, cursor: str | None) -> Call[TopicList]:
    params = _given(order=order, limit=limit, cursor=cursor)
    return Call("GET", "/v1/topics", _read_topics, params=params)


def dead_letters(topic: str | None, limit: int, cursor: str | None) -> Call[TimerPage]:
    params = _given(topic=topic, limit=limit, cursor=cursor)
    return Call("GET", "/v1/deadletters", _read_page, params=params)


def replay(topic: str, timer_id: str) -> Call[Timer]:
    path = f"/v1/deadletters/{segment(topic)}/{segment(timer_id)}/replay"
    return Call("POST", path, _read_timer)


def replay_topic(topic: str) -> Call[Replayed]:
    return Call("POST", f"/v1/deadletters/{segment(topic)}/replay", _read_replayed)


def purge_dead_letters(topic: str | None) -> Call[Purged]:
    return Call("DELETE", "/v1/deadletters", _read_purged, params=_given(topic=topic))


def spec(
    topic: str,
    *,
    id: str | None = None,
    deliver_at_ms: int | None = None,
    delay_ms: int | None = None,
    payload: Payload | None = None,
    headers: dict[str, str] | None = None,
) -> TimerSpec:
    """A TimerSpec; a ``str`` payload goes as text, bytes (``bytes``, ``bytearray``,
    ``memoryview``) as binary; any other type is a TypeError naming ``payload``."""
    text, binary = _split_payload(payload)
    return TimerSpec(
        topic=topic,
        id=id,
        deliver_at_ms=deliver_at_ms,
        delay_ms=delay_ms,
        payload=text,
        payload_b64=binary,
        headers=headers,
    )


def _split_payload(payload: object) -> tuple[str | None, bytes | None]:
    """(text, binary) of a payload: silently dropping one of an unexpected type would
    schedule a timer without it."""
    if payload is None or isinstance(payload, str):
        return payload, None
    if isinstance(payload, bytes | bytearray | memoryview):
        return None, bytes(payload)
    kind = type(payload).__name__
    raise TypeError(f"payload must be str, bytes, bytearray or memoryview, not {kind}")
