"""The node's side of forwarding: answer calls for the partitions it owns, and send calls
for the others to their owners (the wire format: ``cluster.rpc``).

Each call is answered in a task of its own on a worker thread, so calls to one node run
side by side (and their writes share records: group commit); a node never forwards a
call it was sent, so a call moves at most once. A batch's parts for one owner come in
one call (``send_parts``): the owner applies every part it owns in one worker thread
(``cluster.local.write_parts``) and answers each part on its own; a part whose
partition is not (or no longer) its own answers PartitionMovedError.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from cluster.errors import PartitionMovedError
from cluster.local import WRITES, run_local, write_parts
from cluster.loop import LoopThread
from cluster.ownership import Ownership
from cluster.rpc import (
    CALL_TIMEOUT_S,
    decode_call,
    decode_parts_call,
    decode_parts_reply,
    decode_reply,
    encode_call,
    encode_error,
    encode_parts_call,
    encode_parts_reply,
    encode_result,
    parts_subject,
    rpc_subject,
)
from storage.errors import InvalidInputError, StoreClosedError, TimerStoreError

log = logging.getLogger(__name__)
RPC_WORKERS = 32


class RpcServer:
    def __init__(
        self, loop: LoopThread, client: Client, node_id: str, ownership: Ownership
    ) -> None:
        self.loop = loop
        self.client = client
        self.node_id = node_id
        self.ownership = ownership
        self.executor = ThreadPoolExecutor(max_workers=RPC_WORKERS, thread_name_prefix="ts-rpc")
        self._subs: list[Subscription] = []
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._subs = [
            await self.client.subscribe(rpc_subject(self.node_id), cb=self._on_call),
            await self.client.subscribe(parts_subject(self.node_id), cb=self._on_parts),
        ]

    async def _on_call(self, msg: Msg) -> None:
        self._spawn(msg, self._one)

    async def _on_parts(self, msg: Msg) -> None:
        self._spawn(msg, self._parts)

    def _spawn(self, msg: Msg, run: Callable[[bytes], bytes]) -> None:
        task = asyncio.ensure_future(self._answer(msg, run))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _one(self, data: bytes) -> bytes:
        method, partition, args = decode_call(data)
        return encode_result(self._run(partition, method, args))

    def _parts(self, data: bytes) -> bytes:
        method, parts = decode_parts_call(data)
        if method not in WRITES:
            raise InvalidInputError(f"cluster call {method!r} is not split by partition")
        outcomes: dict[int, Any] = {}
        owned = []
        for partition, args in parts:
            part = self.ownership.owner(partition)
            if part is None:
                outcomes[partition] = PartitionMovedError(
                    f"partition {partition} is not owned by {self.node_id}"
                )
            else:
                owned.append((partition, part, args))
        found = write_parts(method, [(part, args) for _, part, args in owned])
        outcomes.update(zip([p for p, _, _ in owned], found, strict=True))
        return encode_parts_reply([outcomes[p] for p, _ in parts])

    async def _answer(self, msg: Msg, run: Callable[[bytes], bytes]) -> None:
        try:
            running = asyncio.get_running_loop()
            data = await running.run_in_executor(self.executor, run, msg.data)
        except TimerStoreError as e:
            data = encode_error(e)
        except Exception:  # the boundary of a call from another node: log, answer 503
            log.exception("cluster call failed")
            data = encode_error(StoreClosedError("the partition's owner failed the call"))
        await msg.respond(data)

    def _run(self, partition: int, method: str, args: tuple[Any, ...]) -> Any:
        part = self.ownership.owner(partition)
        if part is None:
            raise PartitionMovedError(f"partition {partition} is not owned by {self.node_id}")
        return run_local(part, method, args)

    async def stop(self) -> None:
        subs, self._subs = self._subs, []
        for sub in subs:
            await sub.unsubscribe()
        self.executor.shutdown(wait=False)


def forward(
    loop: LoopThread,
    client: Client,
    node_id: str,
    method: str,
    partition: int,
    args: tuple[Any, ...],
) -> Any:
    """The owner's answer. No responders (the owner is gone): PartitionMovedError, which
    the caller may retry (the call never ran); a timeout: StoreClosedError, which it may
    not (the call may have run)."""
    request = client.request(
        rpc_subject(node_id), encode_call(method, partition, args), timeout=CALL_TIMEOUT_S
    )
    try:
        reply = loop.run(request)
    except nats.errors.Error as e:
        raise unanswered(e, f"partition {partition}", node_id) from e
    return decode_reply(method, reply.data)


def unanswered(error: nats.errors.Error, what: str, node_id: str) -> TimerStoreError:
    """What a call the owner did not answer means (see ``forward``)."""
    if isinstance(error, nats.errors.NoRespondersError):
        return PartitionMovedError(f"{what}: {node_id} does not answer")
    if isinstance(error, nats.errors.TimeoutError):
        return StoreClosedError(f"{what}: {node_id} did not answer in {CALL_TIMEOUT_S} s")
    return StoreClosedError(f"{what}: NATS is unreachable: {error!r}")  # the call was not sent


def send_parts(
    loop: LoopThread,
    client: Client,
    node_id: str,
    method: str,
    parts: list[tuple[int, tuple[Any, ...]]],
) -> concurrent.futures.Future[Msg]:
    """Send a batch's parts for the owner ``node_id`` in one call (``parts_answer`` waits)."""
    data = encode_parts_call(method, parts)
    return loop.submit(client.request(parts_subject(node_id), data, timeout=CALL_TIMEOUT_S))


def parts_answer(
    sent: concurrent.futures.Future[Msg], node_id: str, method: str, partitions: list[int]
) -> dict[int, Any]:
    """Each part's result or its TimerStoreError: the owner's answer, or for every part
    the meaning of no answer (as for ``forward``)."""
    try:
        data = sent.result().data
        return dict(zip(partitions, decode_parts_reply(method, data), strict=True))
    except nats.errors.Error as e:
        error = unanswered(e, f"partitions {partitions}", node_id)
    except TimerStoreError as e:
        error = e
    return dict.fromkeys(partitions, error)
