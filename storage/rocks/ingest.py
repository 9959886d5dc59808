"""Ingesting staged SST files (a bulk import) into a RocksDB store, running or stopped.

A staged directory holds sorted SST files for the ``timers`` and ``ids`` families, written
by the Spark import (``pipeline``) with exactly the codec's keys and values, and a
``manifest.json`` describing them. ``ingest_staged`` first reads every staged entry back
and checks it with the rules a schedule keeps (``storage.rocks.staged``): a file RocksDB
cannot read or a single bad record refuses the whole ingest (InvalidInputError naming
the file and the key, a 422), and nothing is added. It then links the files into the live
database with ``ingest_external_file`` (no memtable, no WAL, no compaction of random
writes) and then repairs, in small WriteBatches under the store lock, what an immutable
file cannot know about the live store:

* conflicts: a (topic, id) already pending is skipped (its old key and value are put
  back) unless ``replace``, which deletes the old key; a timer in flight or already
  delivered is always skipped, as ``schedule`` refuses it. Finding conflicts costs one
  batched lookup per imported timer; it is skipped when the store holds no pending timer
  and no delivery record;
* the counters: ``pending:<topic>`` grows by the timers that are new to the store;
* the scan cursor and the watermark: a past-due timer must still be delivered. Keys
  below the persisted watermark would be range-deleted by housekeeping, so they are
  moved to the clamp floor (as ``schedule`` clamps); keys between the watermark and the
  scan cursor stay put and the cursor is moved back to the first of them (as ``release``
  does), so the scanner sees them on its next pass. Given the ingest's ``now_ms``, a
  clock stepped back below the cursor moves both back to now first (as ``schedule``).

Not crash-atomic: the two families are ingested by two calls, and the repair batches
follow the ingestion. A crash between them can leave a skipped conflict replaced or a
pending counter short; the import summary says which (topic, id) were involved.
"""

from __future__ import annotations

import os
import time
from collections import Counter

import msgspec
import rocksdict as rd

from storage.errors import InvalidInputError
from storage.protocol import IngestReport, Skipped
from storage.rocks import keys as layout
from storage.rocks.core import CLOCK_STEP_TOLERANCE_MS, RocksCore
from storage.rocks.counters import CounterDelta
from storage.rocks.db import RocksHandles, multi_get, write_failed
from storage.rocks.reads import BoundedIter
from storage.rocks.staged import StagedFamily, check_staged, read_back
from storage.rules import RecordLimits

MANIFEST = "manifest.json"
FAMILIES = ("timers", "ids")
CHUNK = 4096
REPORT_SAMPLE = 1000  # skipped identities listed by name in the report


class StagedFile(msgspec.Struct, frozen=True):
    family: str  # "timers" or "ids"
    path: str  # relative to the staged directory
    entries: int
    bytes: int
    first_key: str  # hex
    last_key: str  # hex


class Manifest(msgspec.Struct, frozen=True):
    """What the import job staged: files, per-topic timer counts and the job's counts."""

    created_at_ms: int
    floor_ms: int  # the clamp floor the job used for past-due rows
    files: list[StagedFile]
    pending_by_topic: dict[str, int]  # distinct (topic, id) staged, per topic
    rows_read: int = 0
    accepted: int = 0
    rejected: int = 0
    duplicates: int = 0
    version: int = 1


def sst_options() -> rd.Options:
    """Options for ``SstFileWriter``: raw keys, the same table format as the families."""
    opts = rd.Options(raw_mode=True)
    table = rd.BlockBasedOptions()
    table.set_bloom_filter(10, False)
    opts.set_block_based_table_factory(table)
    return opts


def write_manifest(stage_dir: str, manifest: Manifest) -> None:
    path = os.path.join(stage_dir, MANIFEST)
    with open(path + ".tmp", "wb") as f:
        f.write(msgspec.json.format(msgspec.json.encode(manifest)))
    os.replace(path + ".tmp", path)


def read_manifest(stage_dir: str) -> Manifest:
    """The staged directory's manifest, checked: InvalidInputError (``stage_dir``) names
    the manifest's bad field, so no manifest can fail the ingestion any other way."""
    path = os.path.join(stage_dir, MANIFEST)
    try:
        with open(path, "rb") as stream:
            manifest = msgspec.json.decode(stream.read(), type=Manifest)
    except FileNotFoundError:
        raise InvalidInputError(f"no {MANIFEST} in {stage_dir}", field="stage_dir") from None
    except OSError as exc:  # a directory named manifest.json, no permission ...
        raise InvalidInputError(f"cannot read {path}: {exc}", field="stage_dir") from None
    except msgspec.DecodeError as exc:  # malformed JSON, or ValidationError: a bad field
        raise InvalidInputError(f"bad {MANIFEST}: {exc}", field="stage_dir") from None
    counts = Counter[str]()
    for index, f in enumerate(manifest.files):
        _check_staged_file(stage_dir, index, f)
        counts[f.family] += f.entries
    staged = sum(manifest.pending_by_topic.values())
    if counts["timers"] != staged or counts["ids"] != staged:
        raise InvalidInputError(
            f"{MANIFEST} is inconsistent: {counts['timers']} timers, {counts['ids']} ids, "
            f"{staged} per topic",
            field="stage_dir",
        )
    return manifest


def _check_staged_file(stage_dir: str, index: int, f: StagedFile) -> None:
    where = f"{MANIFEST} files[{index}]"
    if f.family not in FAMILIES:
        raise InvalidInputError(f"{where}.family: unknown family {f.family!r}", field="stage_dir")
    root = os.path.realpath(stage_dir)
    if os.path.commonpath([root, os.path.realpath(os.path.join(root, f.path))]) != root:
        raise InvalidInputError(
            f"{where}.path: {f.path} is outside the staged directory", field="stage_dir"
        )
    if not os.path.isfile(os.path.join(stage_dir, f.path)):
        raise InvalidInputError(f"{where}.path: staged file {f.path} is missing", field="stage_dir")
    if not _ends_like_an_sst(os.path.join(stage_dir, f.path)):
        raise InvalidInputError(
            f"{where}.path: {f.path} is not an SST file (no block-based table footer)",
            field="stage_dir",
        )
    for name, value in (("first_key", f.first_key), ("last_key", f.last_key)):
        try:
            bytes.fromhex(value)
        except ValueError:
            raise InvalidInputError(
                f"{where}.{name}: {value[:40]!r} is not hexadecimal", field="stage_dir"
            ) from None


# RocksDB's block-based table ends with this magic number, little-endian
# (kBlockBasedTableMagicNumber, table/block_based/block_based_table_builder.cc)
SST_MAGIC = (0x88E241B785F4CFF7).to_bytes(8, "little")
SST_FOOTER_BYTES = 48  # the smallest footer (format version 0)


def _ends_like_an_sst(path: str) -> bool:
    """Whether the file ends with an SST footer's magic number. The binding raises one
    bare Exception type for every RocksDB error, so a file that is not an SST at all is
    refused here, by name, before ``ingest_external_file`` would fail on it."""
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        if size < SST_FOOTER_BYTES:
            return False
        f.seek(size - len(SST_MAGIC))
        return f.read(len(SST_MAGIC)) == SST_MAGIC


class _Conflicts:
    """Imported identities the store already knows, found before the files go in."""

    def __init__(self) -> None:
        self.pending: list[tuple[bytes, int, int]] = []  # ident, imported ms, old ms
        self.in_flight: list[tuple[bytes, int, int]] = []
        self.delivered: list[tuple[bytes, int, bytes]] = []  # ident, imported ms, record

    def __len__(self) -> int:
        return len(self.pending) + len(self.in_flight) + len(self.delivered)


def ingest_staged(
    core: RocksCore,
    stage_dir: str,
    *,
    limits: RecordLimits,
    replace: bool = False,
    now_ms: int | None = None,
) -> IngestReport:
    """Ingest a staged import into ``store``; see the module docstring for the rules.

    Every staged entry is read back and checked first (``storage.rocks.staged``, with
    ``limits``): a file RocksDB cannot read or a record a schedule would refuse is an
    InvalidInputError naming the file and the key, and nothing is ingested.
    """
    started = time.perf_counter()
    manifest = read_manifest(stage_dir)
    with read_back(stage_dir, [(f.family, f.path) for f in manifest.files]) as staged:
        entries = {(f.family, f.path): f.entries for f in manifest.files}
        check_staged(staged, entries, manifest.pending_by_topic, limits)
        files = {
            family: [os.path.join(stage_dir, path) for path in staged.families[family].paths]
            for family in FAMILIES
        }
        first_key = staged.timers.firsts[0] if staged.timers.firsts else None
        with core.lock:
            h = core.handles  # under the lock: a close() that won it raises StoreClosedError
            if now_ms is not None:  # a clock stepped back: past-due rows are due now, not later
                core.follow_clock(now_ms, CLOCK_STEP_TOLERANCE_MS)
            if first_key is not None:  # staged keys may fall inside a scanned, uncommitted range
                core.note_key_written(first_key)
            conflicts = _find_conflicts(core, staged.ids)
            restore = _old_values(h, conflicts, replace)
            _link_in(core, files)
            replaced = _repair_conflicts(core, manifest, conflicts, restore, replace)
            moved, rewound = _respect_cursor(core, first_key) if first_key else (0, False)
    skipped = [
        *((i, "pending") for i, _, _ in ([] if replace else conflicts.pending)),
        *((i, "in_flight") for i, _, _ in conflicts.in_flight),
        *((i, "delivered") for i, _, _ in conflicts.delivered),
    ]
    staged_count = sum(manifest.pending_by_topic.values())
    return IngestReport(
        files=len(manifest.files),
        bytes=sum(f.bytes for f in manifest.files),
        staged=staged_count,
        added=staged_count - len(conflicts),
        replaced=replaced,
        skipped=len(skipped),
        skipped_by_reason=dict(Counter(reason for _, reason in skipped)),
        skipped_sample=[Skipped(*layout.split_ident(i), r) for i, r in skipped[:REPORT_SAMPLE]],
        moved_past_due=moved,
        cursor_rewound=rewound,
        seconds=round(time.perf_counter() - started, 3),
    )


def _link_in(core: RocksCore, files: dict[str, list[str]]) -> None:
    """The checked files into the live families (StoreFullError when the disk is full)."""
    options = rd.IngestExternalFileOptions()
    options.set_move_files(True)  # a hard link; RocksDB copies across filesystems
    for family in FAMILIES:
        if not files[family]:
            continue
        h = core.handles
        try:
            h.cfs[family].ingest_external_file(files[family], options)
        except Exception as exc:  # the binding raises a bare Exception for every RocksDB error
            raise write_failed(h, exc) from exc


def _store_is_empty(h: RocksHandles, pending: int) -> bool:
    if pending:
        return False
    it = h.cfs["ids"].iter()  # no pending timer: any ids entry is a delivery record
    it.seek_to_first()
    empty = not it.valid()
    del it
    return empty


def _find_conflicts(core: RocksCore, staged_ids: StagedFamily) -> _Conflicts:
    h = core.handles
    conflicts = _Conflicts()
    if not staged_ids.cfs or _store_is_empty(h, sum(core.counters.pending_by_topic.values())):
        return conflicts
    for chunk in staged_ids.chunks():
        idents = [ident for ident, _ in chunk]
        old_values = multi_get(h.cfs["ids"], idents)
        delivered = core.delivered_in_ranges(
            [old + i for old, i in zip(old_values, idents, strict=True) if old and len(old) == 8]
        )
        for i, old in enumerate(old_values):
            if old is not None and (len(old) != 8 or old + idents[i] in delivered):
                # delivered: its record (or its key time, for a range page) must survive
                conflicts.delivered.append((idents[i], layout.read_u64(chunk[i][1]), old))
            elif old is not None:
                ident, new_ms, old_ms = (
                    idents[i],
                    layout.read_u64(chunk[i][1]),
                    layout.read_u64(old),
                )
                key = layout.timer_key(old_ms, *_names(ident))
                target = conflicts.in_flight if key in core.in_flight else conflicts.pending
                target.append((ident, new_ms, old_ms))
    return conflicts


def _names(ident: bytes) -> tuple[bytes, bytes]:
    topic, _, timer_id = ident.partition(layout.SEPARATOR)
    return topic, timer_id


def _old_values(h: RocksHandles, conflicts: _Conflicts, replace: bool) -> dict[bytes, bytes]:
    """Values of kept timers whose key the import overwrites (same identity, same time)."""
    kept = conflicts.in_flight if replace else conflicts.pending + conflicts.in_flight
    keys = [layout.timer_key(old, *_names(i)) for i, new, old in kept if new == old]
    values = multi_get(h.cfs["timers"], keys)
    return {k: v for k, v in zip(keys, values, strict=True) if v is not None}


def _repair_conflicts(
    core: RocksCore,
    manifest: Manifest,
    conflicts: _Conflicts,
    restore: dict[bytes, bytes],
    replace: bool,
) -> int:
    """Undo the import for skipped identities, drop replaced keys, fix the counters."""
    hd = core.handles.handles
    delta = CounterDelta(core.counters)
    for topic, count in manifest.pending_by_topic.items():
        delta.pending[topic] += count
    batch = rd.WriteBatch(raw_mode=True)
    replaced = 0

    def flush() -> None:
        nonlocal batch, delta
        core.write(batch, delta)
        batch, delta = rd.WriteBatch(raw_mode=True), CounterDelta(core.counters)

    kept = conflicts.in_flight if replace else conflicts.pending + conflicts.in_flight
    for ident, new_ms, old_ms in kept:
        names = _names(ident)
        new_key = layout.timer_key(new_ms, *names)
        if new_ms == old_ms:
            batch.put(new_key, restore[new_key], hd["timers"])
        else:
            batch.delete(new_key, hd["timers"])
        batch.put(ident, layout.u64(old_ms), hd["ids"])
        delta.pending[names[0].decode()] -= 1
        if len(batch) >= CHUNK:
            flush()
    for ident, new_ms, record in conflicts.delivered:
        names = _names(ident)
        batch.delete(layout.timer_key(new_ms, *names), hd["timers"])
        batch.put(ident, record, hd["ids"])  # the import overwrote the delivery record
        delta.pending[names[0].decode()] -= 1
        if len(batch) >= CHUNK:
            flush()
    if replace:
        for ident, new_ms, old_ms in conflicts.pending:
            names = _names(ident)
            if new_ms != old_ms:
                batch.delete(layout.timer_key(old_ms, *names), hd["timers"])
            delta.pending[names[0].decode()] -= 1  # it was counted already
            replaced += 1
            if len(batch) >= CHUNK:
                flush()
    flush()
    return replaced


def _respect_cursor(core: RocksCore, first_key: bytes) -> tuple[int, bool]:
    """Make past-due imported keys visible to the scanner; see the module docstring.

    Every live key below the scan cursor is in flight, except the ones just ingested;
    every live key below the watermark was ingested just now.
    """
    h = core.handles
    hd = h.handles
    watermark = layout.u64(core.counters.watermark_ms)
    floor_ms = core.clamp_floor_ms()
    moved = 0
    if first_key < watermark:
        it = BoundedIter(h.cfs["timers"], first_key, watermark)
        batch = rd.WriteBatch(raw_mode=True)
        while it.valid():
            key = it.key()
            _, topic, timer_id = layout.decode_timer_key(key)
            names = topic.encode(), timer_id.encode()
            batch.delete(key, hd["timers"])
            batch.put(layout.timer_key(floor_ms, *names), it.value(), hd["timers"])
            batch.put(layout.ident_key(*names), layout.u64(floor_ms), hd["ids"])
            moved += 1
            if len(batch) >= 3 * CHUNK:
                core.write(batch)
                batch = rd.WriteBatch(raw_mode=True)
            it.next()
        del it
        if len(batch):
            core.write(batch)
    rewound = False
    start = max(first_key, watermark)
    if start < core.scan_from:
        it = BoundedIter(h.cfs["timers"], start, core.scan_from)
        while it.valid() and it.key() in core.in_flight:
            it.next()
        if it.valid():
            core.rewind_cursor(it.key())
            rewound = True
        del it
    return moved, rewound
