"""The node's side of forwarding: answer calls for the partitions it owns, and send calls
for the others to their owners (the wire format: ``cluster.rpc``).

Each call is answered in a task of its own on a worker thread, so calls to one node run
side by side (and their writes share records: group commit); a node never forwards a
call it was sent, so a call moves at most once.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from cluster.errors import PartitionMovedError
from cluster.local import run_local
from cluster.loop import LoopThread
from cluster.ownership import Ownership
from cluster.rpc import (
    CALL_TIMEOUT_S,
    decode_call,
    decode_reply,
    encode_call,
    encode_error,
    encode_result,
    rpc_subject,
)
from storage.errors import StoreClosedError, TimerStoreError

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
        self._sub: Subscription | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._sub = await self.client.subscribe(rpc_subject(self.node_id), cb=self._on_call)

    async def _on_call(self, msg: Msg) -> None:
        task = asyncio.ensure_future(self._answer(msg))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, msg: Msg) -> None:
        try:
            method, partition, args = decode_call(msg.data)
            running = asyncio.get_running_loop()
            result = await running.run_in_executor(
                self.executor, self._run, partition, method, args
            )
            data = encode_result(result)
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
        if self._sub is not None:
            await self._sub.unsubscribe()
            self._sub = None
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
    except nats.errors.NoRespondersError as e:
        raise PartitionMovedError(f"partition {partition}: {node_id} does not answer") from e
    except nats.errors.TimeoutError as e:
        raise StoreClosedError(
            f"partition {partition}: {node_id} did not answer in {CALL_TIMEOUT_S} s"
        ) from e
    except nats.errors.Error as e:  # the connection is down: the call was not sent
        raise StoreClosedError(f"partition {partition}: NATS is unreachable: {e!r}") from e
    return decode_reply(method, reply.data)
