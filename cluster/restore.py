"""Restore of a partition a node takes: its local directory, then the changelog after it.

The local directory ``<rocks path>/partitions/<p>`` is used as it is when its marker
(``cluster.partition``) is clean; a dirty one (changes applied that the changelog may not
hold), a corrupt one or a missing one is emptied and rebuilt from the changelog's first
record (or the newest snapshot, fetched beside it and renamed into place). The
records after the marker's sequence are then applied in order (``cluster.apply``), the
marker written after each, up to the subject's last sequence when the restore began.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
from pathlib import Path

from cluster.apply import apply_record
from cluster.changelog import Changelog
from cluster.loop import LoopThread
from cluster.partition import read_marker, write_marker
from cluster.records import decode_record
from cluster.snapshots import Snapshots
from storage.errors import StoreOpenError
from storage.rocks.db import RocksSettings
from storage.rocks.store import RocksTimerStore

log = logging.getLogger(__name__)


def partition_dir(rocks: RocksSettings, partition: int) -> Path:
    return Path(rocks.path) / "partitions" / str(partition)


def open_local(
    rocks: RocksSettings, partition: int, snapshots: Snapshots | None = None
) -> tuple[RocksTimerStore, int]:
    """The partition's local store and the sequence it holds: its own directory when
    trusted, else (or when older) the newest snapshot, else empty at 0."""
    path = partition_dir(rocks, partition)
    path.parent.mkdir(parents=True, exist_ok=True)
    settings = dataclasses.replace(rocks, path=str(path))
    store = _open_or_empty(settings, partition)
    marker = read_marker(store)
    seq = marker.seq if marker is not None and not marker.dirty else -1
    newest = snapshots.latest(partition) if snapshots is not None else None
    if newest is not None and newest.seq > seq:
        assert snapshots is not None
        store.close()
        fetching = path.with_name(f"{partition}.fetching")  # a kill mid-fetch leaves only it
        shutil.rmtree(fetching, ignore_errors=True)
        snapshots.fetch(newest, fetching)
        shutil.rmtree(path, ignore_errors=True)
        fetching.rename(path)
        store = RocksTimerStore(settings)
        log.info("partition %d: restored from snapshot %s", partition, newest.name)
        return store, newest.seq
    if seq >= 0:
        return store, seq
    if marker is not None:
        log.warning("partition %d: local dir holds unacknowledged changes; rebuilding", partition)
    store.close()
    shutil.rmtree(path, ignore_errors=True)
    store = RocksTimerStore(settings)
    write_marker(store, 0, dirty=False)
    return store, 0


def _open_or_empty(settings: RocksSettings, partition: int) -> RocksTimerStore:
    """The local store; a directory RocksDB finds corrupt (e.g. a node killed while it
    wrote a snapshot into it) is emptied first: it is an index the changelog rebuilds,
    and kept as it is it would fail every restore while this node holds the lease."""
    try:
        return RocksTimerStore(settings)
    except StoreOpenError as e:
        if "Corruption" not in e.message:
            raise  # e.g. another process holds it: never delete what is in use
        log.warning("partition %d: local dir is corrupt (%s); rebuilding", partition, e.message)
        shutil.rmtree(settings.path, ignore_errors=True)
        return RocksTimerStore(settings)


# one step of a restore (the stream's last sequence, one batch of records): a step that
# never answers (a request lost while JetStream elects) fails the restore, which the next
# ownership tick starts again, instead of leaving the partition held but never live
RESTORE_STEP_TIMEOUT_S = 30.0


def catch_up(
    loop: LoopThread, changelog: Changelog, partition: int, store: RocksTimerStore, after_seq: int
) -> int:
    """Apply the partition's records after ``after_seq``; the last sequence applied."""
    upto_seq = loop.run(changelog.last_seq(partition), RESTORE_STEP_TIMEOUT_S)
    reader = changelog.reader(partition, after_seq, upto_seq)
    guard = after_seq > 0  # the record after the marker may be applied in part already
    seq = after_seq
    try:
        while batch := loop.run(reader.next_batch(), RESTORE_STEP_TIMEOUT_S):
            for seq, data in batch:
                apply_record(store, decode_record(data), guard=guard)
                guard = False
                write_marker(store, seq, dirty=False)
    finally:
        loop.run(reader.close(), RESTORE_STEP_TIMEOUT_S)
    return seq
