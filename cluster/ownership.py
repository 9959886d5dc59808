"""Which partitions this node owns, and the loop that keeps it so (``cluster.leases``).

Every ``lease_ms / 3`` the node puts its heartbeat, reads every lease, renews its own, and
takes a partition whose lease is free: at once when it is the partition's preferred alive
owner, and when it is not, once the lease has been expired for ``lease_ms`` more (a
released lease, expires 0, only its preferred owner takes). It hands a partition back
(its local store closed first, then the lease released) when another alive node is
preferred. A partition taken is restored in a worker thread (``cluster.restore``), then
fenced: the node appends a ``FenceOp`` after the last sequence it caught up to, so any
append of the former owner from then on is refused by JetStream.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import nats.errors

from cluster.changelog import Changelog
from cluster.errors import FencedError, PartitionMovedError
from cluster.leases import HeldLease, Lease, LeaseTable, NodeBeat, preferred_owner
from cluster.loop import LoopThread
from cluster.partition import APPEND_DEADLINE_S, OwnedPartition, write_marker
from cluster.records import FenceOp, Record, encode_record
from cluster.restore import RESTORE_STEP_TIMEOUT_S, catch_up, open_local
from cluster.settings import ClusterSettings
from cluster.snapshots import Snapshots
from storage.errors import TimerStoreError
from storage.rocks.db import RocksSettings

log = logging.getLogger(__name__)
FENCE_TRIES = 5
RESTORE_WORKERS = 4
# a snapshot of a partition after this many appended records (each carries many changes)
SNAPSHOT_EVERY_RECORDS = 2_000


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Ownership:
    def __init__(
        self,
        settings: ClusterSettings,
        rocks: RocksSettings,
        loop: LoopThread,
        changelog: Changelog,
        table: LeaseTable,
        snapshots: Snapshots | None = None,
    ) -> None:
        self.settings = settings
        self.node_id = settings.node_id
        self.rocks = rocks
        self.loop = loop
        self.changelog = changelog
        self.table = table
        self.snapshots = snapshots
        self.snapshotting: set[int] = set()
        self.closing = False  # stop() began: no new worker-thread work
        self.lock = threading.Lock()
        self.apply_lock = threading.Lock()  # every owned partition's (cluster.partition)
        self.owned: dict[int, OwnedPartition] = {}
        self.held: dict[int, HeldLease] = {}  # leases held: owned, or being restored
        self.restoring: set[int] = set()
        self.seen: dict[int, HeldLease] = {}  # the last read of every lease
        self.members: dict[str, NodeBeat] = {}
        self.ticks = 0
        # restores apart from snapshots and closes: a long snapshot upload must not hold
        # back the restore of a partition just taken (its timers wait on it)
        self.restorer = ThreadPoolExecutor(RESTORE_WORKERS, thread_name_prefix="ts-restore")
        self.executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="ts-snapshot")
        self.tick_s = settings.lease_ms / 3 / 1000
        self._task: asyncio.Task[None] | None = None
        self.on_owned: Callable[[OwnedPartition], None] | None = None  # in a worker thread

    # ------------------------------------------------------------------ queries
    def owner(self, partition: int) -> OwnedPartition | None:
        """The partition when this node owns it and its lease is live on this clock."""
        with self.lock:
            part = self.owned.get(partition)
            held = self.held.get(partition)
        if part is None or held is None or held.lease is None:
            return None
        return part if held.lease.expires_at_ms > now_ms() else None

    def held_locally(self, partition: int) -> OwnedPartition | None:
        """The partition when this node owns it, live lease or not: for what changes only
        this node's memory (a release of timers in flight), which must reach the store
        even while a renewal is late, or those timers stay in flight once it is renewed."""
        with self.lock:
            return self.owned.get(partition)

    def owned_partition(self, partition: int) -> OwnedPartition:
        """The owned partition, or PartitionMovedError (an outcome for a partition gone)."""
        part = self.owner(partition)
        if part is None:
            raise PartitionMovedError(f"partition {partition} is no longer owned here")
        return part

    def live_partitions(self) -> list[OwnedPartition]:
        """The owned partitions whose lease is live on this clock (what may be delivered)."""
        with self.lock:
            partitions = sorted(self.owned)
        return [part for p in partitions if (part := self.owner(p)) is not None]

    def lease_holder(self, partition: int, *, fresh: bool = False) -> str | None:
        """The node holding the partition's live lease (``fresh``: read it from KV now)."""
        if fresh:
            try:
                self.seen[partition] = self.loop.run(self.table.read(partition), 10)
            except (nats.errors.Error, TimeoutError) as e:
                log.info("partition %d: lease not read: %r", partition, e)
        held = self.seen.get(partition)
        lease = held.lease if held is not None else None
        if lease is None or lease.expires_at_ms <= now_ms():
            return None
        return lease.node_id

    def caught_up(self) -> bool:
        with self.lock:
            return self.ticks > 0 and set(self.held) == set(self.owned)

    def alive(self, now: int) -> list[str]:
        lease_ms = self.settings.lease_ms
        found = [n for n, b in self.members.items() if now - b.heartbeat_ms < lease_ms]
        return sorted(set(found) | {self.node_id})

    # ------------------------------------------------------------------ the loop
    def start(self) -> None:
        self.loop.call_soon(self._start)

    def _start(self) -> None:
        self._task = asyncio.ensure_future(self.run())

    async def stop(self) -> None:
        """Stop balancing, hand every partition back, and leave the nodes bucket."""
        self.closing = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self.release_all()
        try:
            await self.table.leave(self.node_id)
        except (nats.errors.Error, TimeoutError) as exc:  # its heartbeat goes stale instead
            log.warning("node %s: not removed from the nodes bucket (%r)", self.node_id, exc)

    async def run(self) -> None:
        while True:
            try:
                await self.tick()
            except Exception:  # the top of the balance loop: log, try again next tick
                log.exception("cluster balance tick failed")
            await asyncio.sleep(self.tick_s)

    async def tick(self) -> None:
        """One round: every request of a step sent together, so that a tick takes a few
        round trips however many partitions (a slow tick lets leases expire)."""
        now = now_ms()
        beat = NodeBeat(self.settings.advertise_url, now)
        _, self.members = await asyncio.gather(
            self.table.beat(self.node_id, beat), self.table.members()
        )
        alive = self.alive(now)
        partitions = range(self.settings.partitions)
        await asyncio.gather(*(self.balance_one(p, alive) for p in partitions))
        with self.lock:
            self.ticks += 1
        self.snapshot_due()

    async def balance_one(self, partition: int, alive: list[str]) -> None:
        try:
            held = await self.table.read(partition)
            self.seen[partition] = held
            await self.balance(partition, held, alive, now_ms())
        except nats.errors.Error as e:  # one partition's turn; the others go on
            log.warning("partition %d: balance failed: %r", partition, e)

    def snapshot_due(self) -> None:
        """Snapshot (and trim) each owned partition SNAPSHOT_EVERY_RECORDS appends on."""
        if self.snapshots is None:
            return
        with self.lock:
            due = [
                part
                for p, part in self.owned.items()
                if p not in self.snapshotting
                and part.appended - part.snapshot_at >= SNAPSHOT_EVERY_RECORDS
            ]
            self.snapshotting.update(part.partition for part in due)
        for part in due:
            self._submit(self.executor, self.snapshot, part)

    def snapshot(self, part: OwnedPartition) -> None:
        assert self.snapshots is not None
        try:
            appended = part.appended
            if self.snapshots.take(part) is not None:
                part.snapshot_at = appended
        except Exception:  # the top of a snapshot thread: log; the next tick tries again
            log.exception("partition %d: snapshot failed", part.partition)
        finally:
            with self.lock:
                self.snapshotting.discard(part.partition)

    async def balance(self, partition: int, held: HeldLease, alive: list[str], now: int) -> None:
        lease = held.lease
        preferred = preferred_owner(partition, alive)
        mine = self.held.get(partition)
        if mine is not None:
            if held.revision < mine.revision:  # a replica behind the leader answered
                held, lease = mine, mine.lease
            if lease is None or lease.node_id != self.node_id or held.revision != mine.revision:
                self.drop(partition, f"its lease was taken: {lease} at {held.revision}")
            elif preferred != self.node_id and partition in self.owned:
                await self.hand_back(partition, held)
            else:
                await self.renew(partition, held, lease, now)
                self.restore_if_needed(partition)
            return
        if lease is not None and lease.expires_at_ms > now:
            return
        released = lease is not None and lease.expires_at_ms == 0
        long_expired = lease is None or (
            not released and lease.expires_at_ms + self.settings.lease_ms <= now
        )
        if preferred == self.node_id or long_expired:
            await self.take(partition, held, now)

    async def renew(self, partition: int, held: HeldLease, lease: Lease, now: int) -> None:
        renewed = await self.table.write(
            partition, held, Lease(self.node_id, lease.epoch, now + self.settings.lease_ms)
        )
        if renewed is None:
            self.drop(partition, "its lease renewal was refused")
        else:
            with self.lock:
                self.held[partition] = renewed
            self.seen[partition] = renewed

    async def take(self, partition: int, held: HeldLease, now: int) -> None:
        epoch = (held.lease.epoch if held.lease else 0) + 1
        lease = Lease(self.node_id, epoch, now + self.settings.lease_ms)
        got = await self.table.write(partition, held, lease)
        if got is None:
            return  # another node was quicker
        with self.lock:
            self.held[partition] = got
        self.seen[partition] = got
        log.info("partition %d: taking it at epoch %d", partition, epoch)
        self.restore_if_needed(partition)

    def restore_if_needed(self, partition: int) -> None:
        """Start the restore of a held partition not owned yet (again after a failure)."""
        with self.lock:
            held = self.held.get(partition)
            if partition in self.owned or partition in self.restoring or held is None:
                return
            self.restoring.add(partition)
        epoch = held.lease.epoch if held.lease is not None else 0
        self._submit(self.restorer, self.restore, partition, epoch)

    def restore(self, partition: int, epoch: int) -> None:
        """Restore and fence the partition (a worker thread); own it if still held. A
        failure keeps the lease: the next tick tries again."""
        try:
            part = self.restore_and_fence(partition, epoch)
        except Exception as e:  # the top of a restore thread: log; the next tick retries
            log.exception("partition %d: restore failed", partition)
            # the traceback's frames hold the closed store's RocksDB handles, and RocksDB
            # keeps the directory's LOCK while one lives (a logged record may keep the
            # traceback for good): let them go, or every later try finds it locked
            traceback.clear_frames(e.__traceback__)
            with self.lock:
                self.restoring.discard(partition)
            return
        with self.lock:
            self.restoring.discard(partition)
            held = self.held.get(partition)
            owned = held is not None and held.lease is not None and held.lease.epoch == epoch
            if owned:
                self.owned[partition] = part
        if not owned:
            part.close()
        elif self.on_owned is not None:
            try:
                self.on_owned(part)
            except Exception:  # the top of a restore thread: log; ownership stands
                log.exception("partition %d: after-take step failed", partition)

    def restore_and_fence(self, partition: int, epoch: int) -> OwnedPartition:
        store, seq = open_local(self.rocks, partition, self.snapshots)
        fence = encode_record(Record(self.node_id, epoch, [FenceOp(self.node_id, epoch)]))
        try:
            for _ in range(FENCE_TRIES):
                seq = catch_up(self.loop, self.changelog, partition, store, seq)
                msg_id = f"{partition}/{self.node_id}/{epoch}/{seq}"
                append = self.changelog.append(partition, fence, seq, msg_id, APPEND_DEADLINE_S)
                try:
                    seq = self.loop.run(append, RESTORE_STEP_TIMEOUT_S)
                except FencedError:
                    continue  # the former owner appended since: catch up again
                write_marker(store, seq, dirty=False)
                writer = (self.node_id, epoch)
                return OwnedPartition(
                    partition,
                    store,
                    self.changelog,
                    self.loop,
                    writer,
                    seq,
                    self.on_lost,
                    self.apply_lock,
                )
            raise FencedError(f"partition {partition}: could not fence in {FENCE_TRIES} tries")
        except BaseException:
            store.close()
            raise

    def _submit(self, pool: ThreadPoolExecutor, work: Callable[..., object], *args: object) -> None:
        """Run ``work`` on a worker thread; nothing once the node is stopping (its
        executor may be shut down: a restore or snapshot then has no use)."""
        if self.closing:
            return
        try:
            pool.submit(work, *args)
        except RuntimeError:  # shut down between the check and the submit
            log.debug("not run, the node is stopping: %r", work)

    # ------------------------------------------------------------------ letting go
    def on_lost(self, partition: int, error: TimerStoreError) -> None:
        """An append of the partition failed (on the loop thread): stop owning it."""
        self.drop(partition, error.message)

    def drop(self, partition: int, why: str) -> None:
        with self.lock:
            self.held.pop(partition, None)
            part = self.owned.pop(partition, None)
        if part is not None:
            log.warning("partition %d: dropped (%s)", partition, why)
            try:
                self.executor.submit(part.close)
            except RuntimeError:  # the executor is shut down: the process is ending
                part.close()

    async def hand_back(self, partition: int, held: HeldLease) -> None:
        with self.lock:
            part = self.owned.pop(partition, None)
            self.held.pop(partition, None)
        if part is not None:
            try:
                await self.loop.loop.run_in_executor(self.executor, part.close)
            except RuntimeError:  # the executor is shut down: the process is ending
                part.close()
        if held.lease is not None:
            released = Lease(self.node_id, held.lease.epoch, 0)
            try:
                await self.table.write(partition, held, released)
            except (nats.errors.Error, TimeoutError) as exc:
                # JetStream is electing (a server was lost): the partition is closed here
                # all the same, and its lease runs out by itself after lease_ms
                log.warning("partition %d: lease not released (%r); it expires", partition, exc)
        log.info("partition %d: handed back", partition)

    def shutdown(self) -> None:
        """Wait for the worker threads (after ``stop``: no new work is taken)."""
        self.restorer.shutdown(wait=True)
        self.executor.shutdown(wait=True)

    async def release_all(self) -> None:
        """A clean stop: every partition closed and its lease released at once."""
        for partition in sorted(self.owned):
            held = self.seen.get(partition)
            if held is not None:
                await self.hand_back(partition, held)
        with self.lock:
            parts = list(self.owned.values())
            self.owned.clear()
            self.held.clear()
        for part in parts:
            part.close()
