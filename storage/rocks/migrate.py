"""One-shot migration of a format-1 data directory (the first layout) to the current one.

It writes format 2's records, which format 3 reads as they are (format 3 only adds
``ranges`` and journal pages of delivered facts), and the directory gets the current
version when the new store first opens it.

Format 1 kept deliveries in a ``done`` family, the topic log one entry per message and
journal pages of whole entries. Format 2 folds ``done`` into ``ids`` (a delivered record
behind ``DELIVERED_TAG``), writes the log in pages and journal pages of idents
(``storage.rocks.keys``). ``timers``, pending ``ids``, ``deadletter`` and the counters in
``meta`` have the same keys and bytes in both and are copied as they are.

The migration never writes data into the old directory (it only holds RocksDB's LOCK
file there): it builds format 2 in
``<path>.migrating``, opens the result as a store and checks its counts against what it
copied, and only then renames ``<path>`` to ``<path>.format-1`` (kept for the operator to
delete) and the new directory to ``<path>``. Interrupted at any point, the old directory
is still there under its own name, and the next run starts the new one afresh.

What format 1 did not keep, and what the migration writes instead:
- the attempt count of a delivery: from its journal entry (same batch, same retention);
- the sink of a delivery: ``log`` when it has a topic-log offset, else ``callback``
  (format 1's only other sink); the per-sink totals are split the same way;
- the creation time of a log message: from its delivery record (same offset) while that
  is retained (24 h by default), else its requested delivery time.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import msgspec
import rocksdict as rd

from storage import records
from storage.errors import StoreCorruptError, StoreOpenError
from storage.protocol import LOG_SINK
from storage.rocks import keys as layout
from storage.rocks.counters import (
    LOG_START_KEY_PREFIX,
    OFFSET_KEY_PREFIX,
    SINK_TOTAL_PREFIX,
    TOTAL_KEY_PREFIX,
)
from storage.rocks.db import RocksHandles, RocksSettings, is_format_1, iter_items, open_db
from storage.rocks.store import RocksTimerStore

CALLBACK_SINK = "callback"  # format 1's in-process sink, the only one besides the log
MIGRATING_SUFFIX = ".migrating"
BACKUP_SUFFIX = ".format-1"
CHUNK = 1000  # entries per WriteBatch, and the most messages per log page


class Format1Done(msgspec.Struct, array_like=True, frozen=True):
    """``done[topic,id]`` of format 1."""

    delivered_ms: int
    offset: int
    key_ms: int
    requested_deliver_ms: int
    created_ms: int


_decode_done = msgspec.msgpack.Decoder(Format1Done).decode
# format 1's journal entries and log messages have the arrays of today's JournalEntry and
# LogMessage (the same fields in the same order)
_decode_journal = msgspec.msgpack.Decoder(list[records.JournalEntry]).decode


class MigrationReport(msgspec.Struct, frozen=True):
    path: str
    backup: str
    pending: int
    delivered_records: int
    log_messages: int
    log_pages: int
    dead_letters: int
    journal_pages: int


class _Counts(msgspec.Struct):
    pending: int = 0
    delivered_records: int = 0
    log_messages: int = 0
    log_pages: int = 0
    dead_letters: int = 0
    journal_pages: int = 0
    log_span: int = 0  # the counters' sum of (next offset - log start): messages retained


def migrate_format_1(settings: RocksSettings) -> MigrationReport:
    """Migrate the format-1 directory ``settings.path`` to format 2, in place (see above)."""
    path = settings.path.rstrip("/")
    if not is_format_1(path):
        raise StoreOpenError(f"{path} is not a format-1 timerstore RocksDB directory")
    backup, work = path + BACKUP_SUFFIX, path + MIGRATING_SUFFIX
    if os.path.exists(backup):
        raise StoreOpenError(f"{backup} exists (an earlier migration's backup): move it away")
    with _locked(path):
        shutil.rmtree(work, ignore_errors=True)  # what an interrupted run left
        source = _open_format_1(path)
        try:
            target = open_db(replace(settings, path=work))
            try:
                counts = _copy_all(source, target)
            finally:
                target.close()
        finally:
            source.close()
        _check(replace(settings, path=work), counts)
        os.rename(path, backup)
        os.rename(work, path)
    return MigrationReport(
        path, backup, counts.pending, counts.delivered_records, counts.log_messages,
        counts.log_pages, counts.dead_letters, counts.journal_pages,
    )  # fmt: skip


@contextmanager
def _locked(path: str) -> Iterator[None]:
    """Hold RocksDB's own LOCK file (an fcntl lock, as RocksDB takes it) while migrating:
    a read-only open does not take it, and a service still writing the old directory
    would lose what it wrote after the copy."""
    fd = os.open(os.path.join(path, "LOCK"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            raise StoreOpenError(
                f"{path} is in use by another process (a running service?): stop it first"
            ) from exc
        yield
    finally:
        os.close(fd)


def _open_format_1(path: str) -> rd.Rdict:
    families = {name: rd.Options(raw_mode=True) for name in rd.Rdict.list_cf(path)}
    families.pop("default", None)
    try:
        return rd.Rdict(
            path,
            rd.Options(raw_mode=True),
            column_families=families,
            access_type=rd.AccessType.read_only(),
        )
    except Exception as exc:  # the binding raises a bare Exception for every RocksDB error
        raise StoreOpenError(f"cannot open {path} to migrate it: {exc}") from exc


def _copy_all(source: rd.Rdict, target: RocksHandles) -> _Counts:
    counts = _Counts()
    counts.pending = _copy_family(source, target, "timers")
    _copy_family(source, target, "ids")  # format 1 kept only pending key times there
    counts.dead_letters = _copy_family(source, target, "deadletter")
    counts.log_span = _copy_meta(source, target)
    _copy_deliveries(source, target, counts)
    _copy_topic_log(source, target, counts)
    return counts


def _items(source: rd.Rdict, family: str) -> Iterator[tuple[bytes, bytes]]:
    return iter_items(source.get_column_family(family), b"")


def _copy_family(source: rd.Rdict, target: RocksHandles, family: str) -> int:
    writer = _Writer(target)
    for key, value in _items(source, family):
        writer.put(family, key, value)
    return writer.close()


def _copy_meta(source: rd.Rdict, target: RocksHandles) -> int:
    """The counters (same names and u64 values), plus the per-sink totals format 1 lacked;
    return how many log messages the counters say are retained."""
    writer = _Writer(target)
    totals: dict[bytes, int] = {}
    logged = expired = 0
    for key, value in _items(source, "meta"):
        writer.put("meta", key, value)
        if key.startswith(TOTAL_KEY_PREFIX):
            totals[key[len(TOTAL_KEY_PREFIX) :]] = layout.read_u64(value)
        elif key.startswith(OFFSET_KEY_PREFIX):
            logged += layout.read_u64(value)  # every delivery to the log took one offset
        elif key.startswith(LOG_START_KEY_PREFIX):
            expired += layout.read_u64(value)
    delivered = totals.get(b"delivered", 0)
    for sink, count in ((LOG_SINK, logged), (CALLBACK_SINK, max(0, delivered - logged))):
        if count:
            name = TOTAL_KEY_PREFIX + (SINK_TOTAL_PREFIX + sink).encode()
            writer.put("meta", name, layout.u64(count))
    writer.close()
    return logged - expired


def _copy_deliveries(source: rd.Rdict, target: RocksHandles, counts: _Counts) -> None:
    """Each journal page becomes a page of idents; each ``done`` record of it a delivered
    record in ``ids`` with its entry's attempt count. Format 1 wrote both in one batch,
    so every retained ``done`` record is in a retained page (checked). The reverse need
    not hold: format 1's expiry could be stopped between a page's ``done`` deletes and
    the page's own, and such an entry (no record, or the record of a later delivery of
    the same identity) is skipped."""
    done = source.get_column_family("done")
    writer = _Writer(target)
    for key, value in _items(source, "journal"):
        idents = []
        for entry in _decode_journal(value):
            ident = layout.ident_key(entry.topic.encode(), entry.id.encode())
            raw = done.get(ident)
            record = None if raw is None else _decode_done(raw)
            if record is None or record.delivered_ms != entry.delivered_ms:
                continue
            writer.put("ids", ident, _delivered_value(record, entry.attempts))
            idents.append(ident)
        if idents:
            writer.put("journal", key, records.encode(idents))
            counts.journal_pages += 1
            counts.delivered_records += len(idents)
    writer.close()
    retained = sum(1 for _ in _items(source, "done"))
    if retained != counts.delivered_records:
        raise StoreCorruptError(
            f"format-1 data: {retained} delivery records but {counts.delivered_records} in "
            "the journal; nothing was changed"
        )


def _delivered_value(done: Format1Done, attempts: int) -> bytes:
    sink = LOG_SINK if done.offset >= 0 else CALLBACK_SINK
    record = records.DeliveredRecord(
        done.delivered_ms, done.offset, done.key_ms, done.requested_deliver_ms,
        done.created_ms, attempts, sink,
    )  # fmt: skip
    return layout.DELIVERED_TAG + records.encode(record)


def _copy_topic_log(source: rd.Rdict, target: RocksHandles, counts: _Counts) -> None:
    done = source.get_column_family("done")
    writer = _Writer(target)
    for first_key, run in _log_runs(_items(source, "topiclog")):
        topic_sep, first = first_key[:-8], layout.log_key_offset(first_key)
        entries = [
            _log_entry(message, first + i, done.get(topic_sep + message.id.encode()))
            for i, message in enumerate(run)
        ]
        page = records.LogPage(run[0].delivered_ms, entries)
        writer.put("topiclog", first_key, records.encode(page))
        counts.log_pages += 1
        counts.log_messages += len(entries)
    writer.close()


def _log_runs(
    items: Iterator[tuple[bytes, bytes]],
) -> Iterator[tuple[bytes, list[records.LogMessage]]]:
    """(first key, messages) of each run of one topic's consecutive offsets with one
    delivery time, at most CHUNK long: the pages a format-2 commit would have written."""
    first_key, next_key = b"", b""
    run: list[records.LogMessage] = []
    for key, value in items:
        message = records.decode_log_message(value)
        if run and (
            key != next_key or message.delivered_ms != run[0].delivered_ms or len(run) >= CHUNK
        ):
            yield first_key, run
            run = []
        if not run:
            first_key = key
        run.append(message)
        next_key = key[:-8] + layout.u64(layout.log_key_offset(key) + 1)
    if run:
        yield first_key, run


def _log_entry(
    message: records.LogMessage, offset: int, done_raw: bytes | None
) -> records.LogEntry:
    """The format-2 entry; its creation time comes from the delivery record of this very
    message (same offset) while that is retained, else it is the requested time."""
    created_ms = message.requested_deliver_at_ms
    if done_raw is not None:
        done = _decode_done(done_raw)
        if done.offset == offset:
            created_ms = done.created_ms
    record = records.TimerRecord(
        message.payload, message.headers, created_ms, message.requested_deliver_at_ms,
        message.attempts - 1, message.binary,
    )  # fmt: skip
    return records.LogEntry(message.id, message.key_ms, message.attempts, record)


def _check(settings: RocksSettings, counts: _Counts) -> None:
    """Open the result as a store: its own counters must agree with what was copied."""
    store = RocksTimerStore(settings)
    try:
        stats = store.stats()
    finally:
        store.close()
    found = (stats.pending, stats.dead_lettered, counts.log_span)
    copied = (counts.pending, counts.dead_letters, counts.log_messages)
    if found != copied:
        raise StoreCorruptError(
            f"migrated counters (pending, dead letters, log messages) {found} disagree with "
            f"the copied data {copied}; {settings.path} was left for inspection and the "
            "format-1 directory is unchanged"
        )


class _Writer:
    """Raw puts into the new directory in batches of CHUNK."""

    def __init__(self, target: RocksHandles) -> None:
        self._target = target
        self._batch = rd.WriteBatch(raw_mode=True)
        self.written = 0

    def put(self, family: str, key: bytes, value: bytes) -> None:
        self._batch.put(key, value, self._target.handles[family])
        self.written += 1
        if len(self._batch) >= CHUNK:
            self._flush()

    def _flush(self) -> None:
        self._target.db.write(self._batch, self._target.write_options)
        self._batch = rd.WriteBatch(raw_mode=True)

    def close(self) -> int:
        if len(self._batch):
            self._flush()
        return self.written
