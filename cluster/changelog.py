"""The changelog: one JetStream file stream ``TIMERSTORE``, subject ``ts.p.<partition>``.

Every append is fenced by JetStream itself: it carries
``Nats-Expected-Last-Subject-Sequence`` = the last sequence its writer saw on the
partition's subject, so once another owner has appended (its fence record first), the
stale writer's append is refused (JetStream error 10071) and raises ``FencedError``.
A ``Nats-Msg-Id`` makes a retried append (a timeout whose first try was stored after
all) a duplicate JetStream acknowledges with the first try's sequence, not a second record.
"""

from __future__ import annotations

import asyncio
import logging

import nats.errors
import nats.js.errors
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StorageType

from cluster.errors import FencedError, PartitionMovedError, UnsureWriteError
from storage.errors import StoreClosedError

log = logging.getLogger(__name__)
STREAM = "TIMERSTORE"
SUBJECT_PREFIX = "ts.p."
WRONG_LAST_SEQUENCE = 10071  # JetStream's error code for a stale expected sequence
DUPLICATE_WINDOW_S = 120.0
APPEND_TRY_S = 2.0  # one try's timeout; a Raft election takes 4 to 9 s, so several tries
READ_BATCH = 256
# no answer yet (a server lost, a stream electing its leader): the append is tried again
_NOT_ANSWERED = (
    nats.errors.TimeoutError,
    nats.errors.NoRespondersError,
    nats.js.errors.NoStreamResponseError,
    nats.errors.ConnectionClosedError,
)
READ_DEADLINE_S = 30.0


async def ensure_stream(js: JetStreamContext, name: str, subjects: str, replicas: int) -> None:
    """Create the file stream if it is missing (an existing one is used as it is)."""
    try:
        await js.stream_info(name)
    except nats.js.errors.NotFoundError:
        await js.add_stream(
            name=name,
            subjects=[subjects],
            storage=StorageType.FILE,
            num_replicas=replicas,
            duplicate_window=DUPLICATE_WINDOW_S,
        )


def _refused(
    partition: int, expected_seq: int, error: nats.js.errors.APIError, unanswered: bool
) -> StoreClosedError:
    """What a refused append means for its caller (see ``Changelog.append``)."""
    if unanswered:
        return UnsureWriteError(
            f"partition {partition}: an append try went unanswered, then JetStream refused "
            f"one ({error.description}): the record may be stored"
        )
    if error.err_code == WRONG_LAST_SEQUENCE:
        return FencedError(
            f"partition {partition}: another owner appended after sequence {expected_seq}"
        )
    return PartitionMovedError(f"partition {partition}: append failed: {error}")


def subject(partition: int) -> str:
    return f"{SUBJECT_PREFIX}{partition}"


class Changelog:
    def __init__(self, js: JetStreamContext, replicas: int) -> None:
        self.js = js
        self.replicas = replicas

    async def ensure(self) -> None:
        await ensure_stream(self.js, STREAM, SUBJECT_PREFIX + "*", self.replicas)

    async def append(
        self, partition: int, data: bytes, expected_seq: int, msg_id: str, deadline_s: float
    ) -> int:
        """Append one record after ``expected_seq``; its sequence once JetStream acks it.

        FencedError when another writer appended since (and no earlier try went
        unanswered: the record is not stored); PartitionMovedError when JetStream refused
        it otherwise; UnsureWriteError when the outcome is unknown (no try acknowledged
        within ``deadline_s``, or an unanswered try before a refusal). The caller drops the
        partition either way: its local state may hold a change the log does not.
        """
        headers = {
            "Nats-Expected-Last-Subject-Sequence": str(expected_seq),
            "Nats-Msg-Id": msg_id,
        }
        loop = asyncio.get_running_loop()
        give_up_at = loop.time() + deadline_s
        unanswered = False  # a try may have been stored though its answer was lost
        while True:
            try:
                ack = await self.js.publish(
                    subject(partition), data, timeout=APPEND_TRY_S, headers=headers
                )
                return int(ack.seq)
            except nats.js.errors.APIError as e:
                retry = e.code in (503, None) and loop.time() < give_up_at
                if not retry:
                    raise _refused(partition, expected_seq, e, unanswered) from e
            except _NOT_ANSWERED as e:
                unanswered = True
                if loop.time() >= give_up_at:
                    raise UnsureWriteError(
                        f"partition {partition}: append not acknowledged in {deadline_s} s"
                    ) from e
            await asyncio.sleep(0.1)

    async def last_seq(self, partition: int) -> int:
        """The stream sequence of the partition's last record (0: none)."""
        try:
            msg = await self.js.get_last_msg(STREAM, subject(partition))
        except nats.js.errors.NotFoundError:
            return 0
        return int(msg.seq or 0)

    def reader(self, partition: int, after_seq: int, upto_seq: int) -> RecordReader:
        return RecordReader(self.js, partition, after_seq, upto_seq)


class RecordReader:
    """The partition's records with sequences in ``(after_seq, upto_seq]``, batch by batch
    (an ephemeral pull consumer: one request per batch, not one per record)."""

    def __init__(self, js: JetStreamContext, partition: int, after_seq: int, upto_seq: int) -> None:
        self.js = js
        self.partition = partition
        self.seq = after_seq
        self.upto_seq = upto_seq
        self._sub: JetStreamContext.PullSubscription | None = None

    async def next_batch(self) -> list[tuple[int, bytes]]:
        """The next records in order; empty once ``upto_seq`` is reached. A fetch that
        finds nothing yet (a consumer of a replicated stream can start slowly) is tried
        again, for up to READ_DEADLINE_S; then PartitionMovedError."""
        if self.seq >= self.upto_seq:
            return []
        sub = self._sub or await self._subscribe()
        give_up_at = asyncio.get_running_loop().time() + READ_DEADLINE_S
        while True:
            try:
                msgs = await sub.fetch(READ_BATCH, timeout=2)
            except nats.errors.TimeoutError:
                msgs = []
            found = [(int(m.metadata.sequence.stream), m.data) for m in msgs]
            found = [(seq, data) for seq, data in found if self.seq < seq <= self.upto_seq]
            if found:
                self.seq = found[-1][0]
                return found
            if asyncio.get_running_loop().time() > give_up_at:
                raise PartitionMovedError(
                    f"partition {self.partition}: records after {self.seq} unreadable"
                )

    async def _subscribe(self) -> JetStreamContext.PullSubscription:
        config = ConsumerConfig(
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=self.seq + 1,
            ack_policy=AckPolicy.NONE,
            inactive_threshold=30.0,
            mem_storage=True,
            num_replicas=1,
        )
        self._sub = await self.js.pull_subscribe(
            subject(self.partition), stream=STREAM, config=config
        )
        return self._sub

    async def close(self) -> None:
        """Unsubscribe and delete the consumer (else it lingers for inactive_threshold)."""
        if self._sub is not None:
            sub, self._sub = self._sub, None
            await sub.unsubscribe()
            try:
                await self.js.delete_consumer(STREAM, sub._consumer)
            except nats.errors.Error as e:
                log.info("partition %d: read consumer not deleted: %r", self.partition, e)
