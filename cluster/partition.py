"""One partition this node owns: its local RocksTimerStore and its fenced, group-committed
appender.

A write runs ``perform`` on the local store under the partition's lock (so records are
appended in the order the store applied them), queues the operation it returns, and
waits until JetStream has acknowledged the record carrying it. While one record of the
partition is being appended, the operations that arrive queue up and the next record
carries them all (group commit): one append in flight per partition, each fenced by the
sequence the previous one got.

The local directory is trusted only up to its *marker*, a small record in the store's
own control family (``ControlStore`` space ``cluster``, name ``applied``): the last
changelog sequence it holds, and whether it holds changes beyond it. The marker turns
dirty before a change is applied and clean once every applied change is acknowledged;
a directory found dirty on open holds changes the changelog may not, and is rebuilt from
the changelog (``cluster.restore``). When an append fails (fenced by a new owner, or
not acknowledged in time) the partition is lost at once: every waiting request gets the
error (retryable, 503), nothing more is applied, and ``on_lost`` tells the store.

Every partition a node owns applies under one lock of the node's (``apply_lock``), held
only while the local store takes the change. Each partition has its own store and lock,
so without it a node's HTTP and RPC worker threads applied the parts of several
partitions at once: RocksDB lets go of the GIL in every call, and those threads took it
from one another on each, which cost more CPU than the parallel writes saved
(docs/cluster.md, "One apply at a time per node").
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import msgspec

from cluster.changelog import Changelog
from cluster.errors import PartitionMovedError, UnsureWriteError
from cluster.loop import LoopThread
from cluster.records import Op, Record, encode_record
from storage.errors import TimerStoreError
from storage.rocks.store import RocksTimerStore

log = logging.getLogger(__name__)
T = TypeVar("T")
MARKER_SPACE, MARKER_NAME = "cluster", "applied"
APPEND_DEADLINE_S = 15.0  # longer than a Raft election (4 to 9 s measured)


class Marker(msgspec.Struct, array_like=True, frozen=True):
    seq: int
    dirty: bool


def read_marker(store: RocksTimerStore) -> Marker | None:
    raw = store.control.get(MARKER_SPACE, MARKER_NAME)
    return None if raw is None else msgspec.msgpack.decode(raw, type=Marker)


def write_marker(store: RocksTimerStore, seq: int, dirty: bool) -> None:
    store.control.put(MARKER_SPACE, MARKER_NAME, msgspec.msgpack.encode(Marker(seq, dirty)))


class OwnedPartition:
    def __init__(
        self,
        partition: int,
        store: RocksTimerStore,
        changelog: Changelog,
        loop: LoopThread,
        writer: tuple[str, int],
        last_seq: int,
        on_lost: Callable[[int, TimerStoreError], None],
        apply_lock: threading.Lock,
    ) -> None:
        self.partition = partition
        self.store = store
        self.changelog = changelog
        self.loop = loop
        self.node_id, self.epoch = writer
        self.last_seq = last_seq
        self.on_lost = on_lost
        self.apply_lock = apply_lock  # the node's: one partition's change applied at a time
        self.lock = threading.Lock()
        self.lost: TimerStoreError | None = None
        self._pending: list[tuple[Op, concurrent.futures.Future[None]]] = []
        self._flushing = False
        self._dirty = False
        self._task: asyncio.Task[None] | None = None
        self.appended = 0  # records appended by this owner (cluster.ownership's snapshots)
        self.snapshot_at = 0  # ``appended`` when the last snapshot was taken

    @property
    def appending(self) -> bool:
        """True while this partition's record is sent and not yet acknowledged."""
        return self._flushing

    def check(self) -> None:
        if self.lost is not None:
            raise PartitionMovedError(f"partition {self.partition} moved: {self.lost.message}")

    def write(self, perform: Callable[[RocksTimerStore], tuple[T, Op | None]]) -> T:
        """``perform`` on the local store, answered once its operation is acknowledged."""
        result, waiter = self.begin(perform)
        if waiter is not None:
            waiter.result()
        return result

    def begin(
        self,
        perform: Callable[[RocksTimerStore], tuple[T, Op | None]],
        starts: list[OwnedPartition] | None = None,
    ) -> tuple[T, concurrent.futures.Future[None] | None]:
        """``perform`` on the local store and its operation queued: the result, and the
        future that resolves once the operation is acknowledged (None: nothing to append).
        With ``starts``, a flush to start is added to it instead of waking the loop, so a
        caller writing several partitions wakes it once (``start_flushes``)."""
        with self.lock:
            self.check()
            with self.apply_lock:
                if not self._dirty:
                    write_marker(self.store, self.last_seq, dirty=True)
                    self._dirty = True
                try:
                    result, op = perform(self.store)
                except BaseException:  # nothing applied (each store write is atomic)
                    self._settle_marker()
                    raise
            if op is None:
                self._settle_marker()
                return result, None
            waiter: concurrent.futures.Future[None] = concurrent.futures.Future()
            self._pending.append((op, waiter))
            if not self._flushing:
                self._flushing = True
                if starts is None:
                    self.loop.call_soon(self._start_flush)
                else:
                    starts.append(self)
        return result, waiter

    def _settle_marker(self) -> None:
        """(lock held) Clean again when nothing applied awaits an acknowledgement."""
        if self._dirty and not self._pending and not self._flushing and self.lost is None:
            write_marker(self.store, self.last_seq, dirty=False)
            self._dirty = False

    def checkpoint(self, make: Callable[[RocksTimerStore], None]) -> int | None:
        """``make(store)`` while every applied change is acknowledged (the marker clean at
        ``last_seq``), writes held back; the sequence it covers, None when some await."""
        with self.lock:
            if self.lost is not None or self._pending or self._flushing or self._dirty:
                return None
            make(self.store)
            return self.last_seq

    def append_now(self, op: Op) -> None:
        """Append one operation (a fence) with nothing applied locally."""
        self.write(lambda _store: (None, op))

    def _start_flush(self) -> None:
        self._task = asyncio.ensure_future(self._flush())

    async def _flush(self) -> None:
        while True:
            with self.lock:
                batch, self._pending = self._pending, []
                if not batch:
                    self._flushing = False
                    if self.lost is None:
                        write_marker(self.store, self.last_seq, dirty=False)
                        self._dirty = False
                    return
            record = Record(self.node_id, self.epoch, [op for op, _ in batch])
            msg_id = f"{self.partition}/{self.node_id}/{self.epoch}/{self.last_seq}"
            try:
                seq = await self.changelog.append(
                    self.partition, encode_record(record), self.last_seq, msg_id, APPEND_DEADLINE_S
                )
            except TimerStoreError as e:
                self._lose(e, batch)
                return
            except Exception as e:  # the top of the append task: no waiter may hang
                log.exception("partition %d: append failed", self.partition)
                self._lose(UnsureWriteError(f"append failed: {e!r}"), batch)
                return
            with self.lock:
                self.last_seq = seq
                self.appended += 1
            for _, waiter in batch:
                waiter.set_result(None)

    def _lose(
        self, error: TimerStoreError, sent: list[tuple[Op, concurrent.futures.Future[None]]]
    ) -> None:
        """The partition is lost. The writes of the record sent get the append's outcome:
        ``UnsureWriteError`` (they may be stored) or PartitionMovedError (not stored: the
        router may retry them at the new owner); those queued behind it, never sent, get
        PartitionMovedError."""
        log.warning("partition %d lost: %s", self.partition, error.message)
        with self.lock:
            self.lost = error
            unsent, self._pending = self._pending, []
            self._flushing = False
        moved = PartitionMovedError(f"partition {self.partition} moved: {error.message}")
        outcome = error if isinstance(error, UnsureWriteError) else moved
        for _, waiter in sent:
            waiter.set_exception(outcome)
        for _, waiter in unsent:
            waiter.set_exception(moved)
        self.on_lost(self.partition, error)

    def drain(self, timeout_s: float) -> bool:
        """Wait until no append is in flight or queued; True when none is."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                if not self._flushing:
                    return True
            time.sleep(0.01)
        return False

    def close(self) -> None:
        """Close the local store once the appends in flight are done or lost."""
        self.drain(APPEND_DEADLINE_S)
        with self.lock:
            self.lost = self.lost or PartitionMovedError(f"partition {self.partition} closed")
            self.store.close()


def start_flushes(starts: list[OwnedPartition]) -> None:
    """Start the flushes ``begin`` left to its caller, with one wake-up of their loop."""
    if starts:
        starts[0].loop.call_soon(_start_all, list(starts))


def _start_all(starts: list[OwnedPartition]) -> None:
    for part in starts:
        part._start_flush()
