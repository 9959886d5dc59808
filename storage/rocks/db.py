"""Opening the RocksDB database: column families, raw mode, durability options."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import rocksdict as rd

from storage.errors import StoreFormatError, StoreFullError, StoreOpenError

rd_key = Any  # the binding's key union; raw mode only ever sees bytes

# "control" belongs to storage.rocks.control (routes, consumer groups): the timer layout
# never reads or writes it.
FAMILIES = ("timers", "ids", "topiclog", "deadletter", "journal", "ranges", "meta", "control")
POINT_LOOKUP_FAMILIES = ("ids", "deadletter")  # read by multi-get of whole keys, never scanned
FORMAT_VERSION = 3
# Format 3 only adds to format 2 (the ranges family and DeliveredPage journal pages):
# a format-2 directory is read as it is and marked format 3 when opened.
UPGRADED_IN_PLACE = frozenset({2})
REFERENCE_MEMTABLE_BYTES = 32 << 20  # the size RocksDB's L0 file-count defaults suit
# ``timers`` is read by due-time ranges and by gets of keys that exist (found through
# ``ids``), so it keeps bloom filters only above its bottommost level, where about 90% of
# its keys live (RocksDB's optimize_filters_for_hits), and 16 KiB blocks (a quarter of the
# index entries of 4 KiB ones). Its index and filters, held beside the block cache, fell
# from 23.3 to 4.4 MiB at 10,000,000 pending (docs/operations.md, "Memory").
TIMERS_BLOCK_BYTES = 16 << 10
# L0 files (of 32 MiB flushes) before RocksDB slows and stops writes: its defaults (20, 36)
# for every family but ``timers``, which takes (48, 80). Nothing reads ``timers`` by point
# lookups on the write path (``ids`` answers those), so more L0 files cost it little. At
# RocksDB's 20, past 30,000,000 pending the writer slept up to a third of each window while
# the one compaction job caught up, leaving a core idle; at 48 it never slept, and
# compaction wrote as much (4 KB payloads: a third less; docs/bench.md, "The L0 write stall").
LEVEL0_STALL_FILES = (20, 36)
TIMERS_LEVEL0_STALL_FILES = (48, 80)
# ``ids`` flushes four of its 8 MiB memtables into one L0 file: inserts stay in a shallow
# skiplist, and L0 holds a quarter of the files. Every schedule multi-gets new names
# through all of ``ids``'s L0 files, and while the one compaction job served ``timers``,
# 8 MiB files piled up to 72: the lookup rose from 0.6 to 2.2 us a timer. Four to a
# flush, at most 10 files and 0.93 us at 40,000,000 pending (docs/bench.md, "The `ids`
# lookup").
IDS_MEMTABLES_PER_FLUSH = 4
FORMAT_KEY = b"format_version"
# Format 1 (the first layout) kept deliveries in a family of its own named "done".
_FORMAT_1_FAMILY = "done"


@dataclass(frozen=True)
class RocksSettings:
    """Settings of the RocksDB store; built from the service settings at startup."""

    path: str = ""  # a directory; the service derives it from data_dir
    sync_writes: bool = False  # fsync the WAL on every write (WAL is always on unless disable_wal)
    disable_wal: bool = False  # benchmark only: loses unflushed writes on a crash
    block_cache_bytes: int = 64 << 20
    # Memtables are small on purpose: ids takes one insert per scheduled and one per
    # delivered timer at keys in no order, and a skiplist that stays shallow and in the CPU
    # caches costs less per insert (docs/perf.md: 32 -> 8 MiB cut the commit's write from
    # 3.1 to 1.8 us per timer). Timers keep 32 MiB: smaller, its L0 compacts and stalls by
    # file count sooner, and 4 KB payloads enqueued slower at 2,000,000 pending.
    write_buffer_bytes: int = 8 << 20  # per column family memtable, but timers
    timers_write_buffer_bytes: int = 32 << 20
    # all memtables together: when they pass this RocksDB flushes, so memory stays bounded
    # by configuration whatever the write rate and the number of families
    write_buffer_total_bytes: int = 128 << 20
    done_retention_ms: int = 24 * 3600 * 1000
    log_retention_ms: int = 7 * 24 * 3600 * 1000
    statistics: bool = False  # RocksDB tickers (used by tests to count skipped tombstones)
    # SST index and filter blocks in the block cache (L0's pinned there) instead of beside
    # it: memory then stays within block_cache_bytes however many timers are pending
    # (beside it they take about 4 bytes a pending timer: 18.6 MiB at 5,000,000). Off by
    # default: at 5,000,000 pending the schedule ran at 0.41 of its first rate with them
    # in the cache, 0.96 to 0.99 beside it (docs/operations.md, "Memory")
    cache_index_and_filter_blocks: bool = False
    blob_min_bytes: int | None = None  # enable BlobDB (key-value separation) for timers
    # tests only: keep every tombstone until a manual compaction (the worst case)
    disable_auto_compactions: bool = False


@dataclass
class WriteHealth:
    """How the store's writes fare, for readiness and ``/metrics``: whether the last write
    found the disk full (until a write succeeds again) and the failed writes by reason."""

    no_space: bool = False
    failures: Counter[str] = field(default_factory=Counter)


@dataclass
class RocksHandles:
    """The open database and one (Rdict, ColumnFamily handle) pair per family."""

    db: rd.Rdict
    options: rd.Options
    write_options: rd.WriteOptions
    cfs: dict[str, rd.Rdict]
    handles: dict[str, rd.ColumnFamily]
    path: str = ""
    health: WriteHealth = field(default_factory=WriteHealth)

    def close(self) -> None:
        # close() keeps the LOCK while derived objects live: drop them first.
        self.cfs.clear()
        self.handles.clear()
        self.db.close()


def _family_options(settings: RocksSettings, cache: rd.Cache, name: str) -> rd.Options:
    opts = rd.Options(raw_mode=True)
    table = rd.BlockBasedOptions()
    table.set_block_cache(cache)
    table.set_bloom_filter(10, False)
    if name == "timers":
        table.set_block_size(TIMERS_BLOCK_BYTES)
        opts.set_optimize_filters_for_hits(True)
    if settings.cache_index_and_filter_blocks:
        table.set_cache_index_and_filter_blocks(True)
        table.set_pin_l0_filter_and_index_blocks_in_cache(True)
    opts.set_block_based_table_factory(table)
    memtable_bytes = (
        settings.timers_write_buffer_bytes if name == "timers" else settings.write_buffer_bytes
    )
    opts.set_write_buffer_size(memtable_bytes)
    l0_file_bytes = memtable_bytes
    if name == "ids":
        opts.set_min_write_buffer_number_to_merge(IDS_MEMTABLES_PER_FLUSH)
        # the merged ones, one filling, and one more so that a slow flush does not stop writes
        opts.set_max_write_buffer_number(IDS_MEMTABLES_PER_FLUSH + 2)
        l0_file_bytes *= IDS_MEMTABLES_PER_FLUSH
    stall_files = TIMERS_LEVEL0_STALL_FILES if name == "timers" else LEVEL0_STALL_FILES
    compact, slowdown, stop = level0_triggers(l0_file_bytes, stall_files)
    opts.set_level_zero_file_num_compaction_trigger(compact)
    opts.set_level_zero_slowdown_writes_trigger(slowdown)
    opts.set_level_zero_stop_writes_trigger(stop)
    opts.set_disable_auto_compactions(settings.disable_auto_compactions)
    if name in POINT_LOOKUP_FAMILIES:
        # a bloom filter over the memtable's whole keys: a schedule's multi-get of new ids
        # misses without walking the skiplist (0.9 -> 0.4 us a key; docs/perf.md)
        opts.set_memtable_whole_key_filtering(True)
        opts.set_memtable_prefix_bloom_ratio(0.1)
    if name == "timers" and settings.blob_min_bytes is not None:
        opts.set_enable_blob_files(True)
        opts.set_min_blob_size(settings.blob_min_bytes)
        opts.set_enable_blob_gc(True)
    return opts


def level0_triggers(
    l0_file_bytes: int, stall_files: tuple[int, int] = LEVEL0_STALL_FILES
) -> tuple[int, int, int]:
    """L0 files before compaction, slowdown and stop for a family whose flushes write
    ``l0_file_bytes`` of memtable: 4 files (RocksDB's default) and ``stall_files``, each
    scaled so that L0 holds as many bytes as it would with 32 MiB memtables.

    Small memtables make inserts cheap (a shallow skiplist: docs/perf.md, "The memtable
    step"), but with the default triggers they compact L0 as often as they flush. Keys
    arriving in no order (timers by due time, ids by name) make every L0 file overlap
    all of L1, so each L0 compaction rewrites L1: ``timers`` at 8 MiB with the default
    trigger enqueued at 0.56-0.66 of its first rate at 10,000,000 pending (0.83-0.87 at
    32 MiB), and ``ids`` at 8 MiB at 0.52 and 0.68 at 20,000,000 (0.74 and 0.93 scaled,
    0.70 and 0.93 at 32 MiB). The stalls count files too, so they scale the same way.
    """
    scale = max(1, REFERENCE_MEMTABLE_BYTES // l0_file_bytes)
    slowdown, stop = stall_files
    return 4 * scale, slowdown * scale, stop * scale


def is_format_1(path: str) -> bool:
    """True when ``path`` holds a database the first layout wrote (it has ``done``)."""
    if not os.path.exists(os.path.join(path, "CURRENT")):
        return False
    try:
        families = rd.Rdict.list_cf(path)
    except Exception as exc:  # the binding raises a bare Exception for every RocksDB error
        raise StoreOpenError(_open_failed(path, exc)) from exc
    return _FORMAT_1_FAMILY in families


def _open_failed(path: str, exc: Exception) -> str:
    """The one line for a database RocksDB would not open: where, its cause, what to do."""
    cause = str(exc)
    if "LOCK" in cause and ("Resource temporarily unavailable" in cause or "lock" in cause):
        advice = (
            "another process holds it (a service still running): stop that one, or give "
            "this one another data_dir (--data-dir or TIMERSTORE_DATA_DIR)"
        )
    else:
        advice = (
            "check that this user can read and write it, and restore it from a backup "
            "if RocksDB says it is corrupt"
        )
    return f"cannot open the RocksDB store in {path}: {cause}. {advice[0].upper()}{advice[1:]}."


def _format_error(path: str, found: int) -> StoreFormatError:
    if found == 1:
        what_to_do = (
            "Stop the service and run `timerstore migrate` with the same settings: it "
            f"rewrites the directory in format {FORMAT_VERSION} and keeps the old one "
            "beside it."
        )
    else:
        what_to_do = "Run the timerstore version that wrote it, or start on an empty directory."
    return StoreFormatError(
        f"{path} holds timerstore RocksDB data format {found}; this version reads format "
        f"{FORMAT_VERSION}. {what_to_do}",
        found=found,
        expected=FORMAT_VERSION,
    )


def _check_format(path: str, meta: rd.Rdict) -> None:
    """Record the format version in a new directory (or one of a format this version
    upgrades by only adding to it); refuse any other version."""
    raw = meta.get(FORMAT_KEY)
    found = None if raw is None else int.from_bytes(raw, "big")
    if found is None or found in UPGRADED_IN_PLACE:
        meta.put(FORMAT_KEY, FORMAT_VERSION.to_bytes(8, "big"))
    elif found != FORMAT_VERSION:
        raise _format_error(path, found)


def _make_store_dir(path: str) -> None:
    """Create the store's directory (and its parents); StoreOpenError when the OS refuses."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:  # a parent that is a file, is missing on a read-only mount ...
        cause = exc.strerror or str(exc)
        where = exc.filename if exc.filename is not None else path
        raise StoreOpenError(
            f"cannot create the RocksDB store directory {path}: {cause} ({where}). Set "
            "data_dir (--data-dir or TIMERSTORE_DATA_DIR) to a directory this user can "
            "create and write."
        ) from exc


def open_db(settings: RocksSettings) -> RocksHandles:
    """Open (or create) the store's database; StoreOpenError names the directory and cause."""
    _make_store_dir(settings.path)
    if is_format_1(settings.path):
        raise _format_error(settings.path, 1)
    cache = rd.Cache(settings.block_cache_bytes)
    options = rd.Options(raw_mode=True)
    options.create_if_missing(True)
    options.create_missing_column_families(True)
    options.increase_parallelism(2)
    options.set_db_write_buffer_size(settings.write_buffer_total_bytes)
    # the default family holds nothing of ours; its memtable size (RocksDB's 64 MiB) would
    # set the free space RocksDB waits for before it clears a full disk's error by itself
    # (its "required disk buffer": the largest memtable of any family)
    options.set_write_buffer_size(settings.write_buffer_bytes)
    if settings.statistics:
        options.enable_statistics()
    families = {name: _family_options(settings, cache, name) for name in FAMILIES}
    try:
        db = rd.Rdict(settings.path, options, column_families=families)
    except Exception as exc:  # LOCK held, corrupt or missing files: all a bare Exception
        raise StoreOpenError(_open_failed(settings.path, exc)) from exc
    write_options = rd.WriteOptions()
    write_options.sync = settings.sync_writes
    write_options.disable_wal = settings.disable_wal  # type: ignore[method-assign,assignment]
    cfs = {name: db.get_column_family(name) for name in FAMILIES}
    handles = {name: db.get_column_family_handle(name) for name in FAMILIES}
    h = RocksHandles(db, options, write_options, cfs, handles, settings.path)
    try:
        _check_format(settings.path, cfs["meta"])
    except StoreFormatError:
        h.close()
        raise
    return h


def read_ticker(options: rd.Options, name: str) -> int:
    """One RocksDB statistics ticker (``rocksdb.number.iter.skip`` ...), 0 when disabled."""
    text = options.get_statistics() or ""
    for line in text.splitlines():
        if line.startswith(name + " COUNT"):
            return int(line.rsplit(":", 1)[1])
    return 0


NO_SPACE = "No space left on device"  # strerror(ENOSPC), in RocksDB's "IO error: ..." text


def no_space(exc: Exception) -> bool:
    """Whether a RocksDB error is the disk's ENOSPC (the binding raises one bare Exception
    type for every RocksDB error: its text tells them apart)."""
    return NO_SPACE in str(exc)


def full_disk_error(path: str, exc: Exception) -> StoreFullError:
    return StoreFullError(
        f"the disk under the store ({path}) is full: the write was refused and nothing of "
        f"it stored; writes succeed again once space is freed ({exc})"
    )


def write_batch(h: RocksHandles, batch: rd.WriteBatch) -> None:
    """``db.write``, noted in ``h.health``; StoreFullError when the disk is full (ENOSPC)."""
    try:
        h.db.write(batch, h.write_options)
    except Exception as exc:  # the binding raises a bare Exception for every RocksDB error
        raise write_failed(h, exc) from exc
    h.health.no_space = False


def write_failed(h: RocksHandles, exc: Exception) -> Exception:
    """What a failed write raises (StoreFullError for ENOSPC, else ``exc``), noted."""
    if no_space(exc):
        h.health.no_space = True
        h.health.failures["no_space"] += 1
        return full_disk_error(h.path, exc)
    h.health.failures["other"] += 1
    return exc


def multi_get(cf: rd.Rdict, keys: list[bytes]) -> list[bytes | None]:
    """One batched point lookup (the binding's ``cf[list]``), typed for raw mode."""
    if not keys:
        return []
    return cast(list[bytes | None], cf[cast(list[rd_key], keys)])


def iter_keys(cf: rd.Rdict, start: bytes, options: rd.ReadOptions) -> Iterator[bytes]:
    return cast(Iterator[bytes], cf.keys(from_key=start, read_opt=options))


def iter_items(
    cf: rd.Rdict, start: bytes, options: rd.ReadOptions | None = None
) -> Iterator[tuple[bytes, bytes]]:
    return cast(Iterator[tuple[bytes, bytes]], cf.items(from_key=start, read_opt=options))
