"""A staged import read back and checked before any of it goes into the store.

rocksdict has no SST reader, so each staged file is linked into a scratch database in
the staged directory, one column family per file (the originals stay for the real
ingestion). A file RocksDB cannot read fails there, by name. Then every entry is checked
with the rules a schedule keeps, so an ingest adds nothing a ``POST /v1/timers`` would
refuse, and nothing the engine could not deliver:

* ``timers``: the key is ``u64be(key time) | topic | 0x00 | id`` with names that follow
  ``storage.names``; the value decodes as a ``TimerRecord`` that keeps ``storage.rules``
  (times, payload and header limits, UTF-8 text) and is not due before its requested
  time (no early delivery);
* ``ids``: the key is ``topic | 0x00 | id``, the value the 8-byte key time of a timer
  that the ``timers`` files hold;
* counts: each file holds what the manifest says, both families the same number, each
  topic its ``pending_by_topic``; the files of one family do not overlap.

The first broken rule is an InvalidInputError (a 422) naming the file and the key.
"""

from __future__ import annotations

import bisect
import itertools
import os
import shutil
import struct
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import msgspec
import rocksdict as rd

from storage import records
from storage.errors import InvalidInputError
from storage.names import all_valid_idents, validate_name
from storage.rocks import keys as layout
from storage.rocks.db import full_disk_error, iter_items, multi_get, no_space
from storage.rules import RecordLimits, check_record, records_fit

CHUNK = 4096


class StagedFamily:
    """One family's staged files, each in its own scratch column family, by first key."""

    def __init__(self) -> None:
        self.paths: list[str] = []  # relative to the staged directory
        self.cfs: list[rd.Rdict] = []
        self.firsts: list[bytes] = []  # each file's first and last key, read back
        self.lasts: list[bytes] = []

    def items(self, index: int) -> Iterator[list[tuple[bytes, bytes]]]:
        """The file's entries, in chunks."""
        return self.chunks_of(self.cfs[index])

    @staticmethod
    def chunks_of(cf: rd.Rdict) -> Iterator[list[tuple[bytes, bytes]]]:
        items = iter_items(cf, b"")
        while chunk := list(itertools.islice(items, CHUNK)):
            yield chunk

    def chunks(self) -> Iterator[list[tuple[bytes, bytes]]]:
        for index in range(len(self.cfs)):
            yield from self.items(index)

    def lookup(self, keys: list[bytes]) -> list[bytes | None]:
        """Values of ``keys`` (sorted or not) from the file whose range holds each."""
        found: list[bytes | None] = [None] * len(keys)
        by_file: dict[int, list[int]] = {}
        for i, key in enumerate(keys):
            f = bisect.bisect_right(self.firsts, key) - 1
            if f >= 0 and key <= self.lasts[f]:
                by_file.setdefault(f, []).append(i)
        for f, positions in by_file.items():
            values = multi_get(self.cfs[f], [keys[i] for i in positions])
            for i, value in zip(positions, values, strict=True):
                found[i] = value
        return found


class Staged:
    """The staged files read back: ``timers`` and ``ids``."""

    def __init__(self) -> None:
        self.families = {"timers": StagedFamily(), "ids": StagedFamily()}

    @property
    def timers(self) -> StagedFamily:
        return self.families["timers"]

    @property
    def ids(self) -> StagedFamily:
        return self.families["ids"]


@contextmanager
def read_back(stage_dir: str, files: list[tuple[str, str]]) -> Iterator[Staged]:
    """The staged ``(family, relative path)`` files in a scratch database, for the block."""
    scratch = tempfile.mkdtemp(prefix=".check-", dir=stage_dir)
    options = rd.Options(raw_mode=True)
    options.create_if_missing(True)
    db = rd.Rdict(scratch, options)
    staged = Staged()
    try:
        for index, (family, path) in enumerate(files):
            cf = db.create_column_family(f"f{index}", rd.Options(raw_mode=True))
            _link_in(cf, os.path.join(stage_dir, path), os.path.join(scratch, f"in-{index}.sst"))
            _add_file(staged.families[family], path, cf)
        _check_no_overlap(staged)
        yield staged
    finally:
        for opened in staged.families.values():
            opened.cfs.clear()
        db.close()
        del db
        shutil.rmtree(scratch, ignore_errors=True)


def _link_in(cf: rd.Rdict, source: str, link: str) -> None:
    try:
        os.link(source, link)  # RocksDB moves the link in: the staged file stays
    except OSError:  # a filesystem without hard links
        shutil.copyfile(source, link)
    options = rd.IngestExternalFileOptions()
    options.set_move_files(True)
    try:
        cf.ingest_external_file([link], options)
    except Exception as exc:  # the binding raises a bare Exception for every RocksDB error
        if no_space(exc):
            raise full_disk_error(os.path.dirname(link), exc) from exc
        name = os.path.basename(source)
        raise InvalidInputError(
            f"staged file {name}: RocksDB cannot read it as an SST file ({exc})",
            field="stage_dir",
        ) from None


def _add_file(family: StagedFamily, path: str, cf: rd.Rdict) -> None:
    it = cf.iter()
    it.seek_to_first()
    first = it.key() if it.valid() else None
    it.seek_to_last()
    last = it.key() if it.valid() else None
    del it
    if first is None or last is None:
        raise InvalidInputError(f"staged file {path} holds no entry", field="stage_dir")
    at = bisect.bisect_left(family.firsts, first)
    family.firsts.insert(at, first)
    family.lasts.insert(at, last)
    family.paths.insert(at, path)
    family.cfs.insert(at, cf)


def _check_no_overlap(staged: Staged) -> None:
    for family in staged.families.values():
        for i in range(1, len(family.cfs)):
            if family.firsts[i] <= family.lasts[i - 1]:
                raise InvalidInputError(
                    f"staged files {family.paths[i - 1]} and {family.paths[i]} overlap "
                    f"(keys {family.firsts[i].hex()} .. {family.lasts[i - 1].hex()})",
                    field="stage_dir",
                )


def _bad(path: str, key: bytes, rule: str) -> InvalidInputError:
    return _refused(f"staged file {path}, key {key.hex()}: {rule}")


def _names(ident: bytes) -> tuple[str, str]:
    """The topic and id of ``topic | 0x00 | id``, or ValueError naming the rule."""
    parts = ident.split(layout.SEPARATOR)
    if len(parts) != 2:
        raise ValueError("the names part is not topic, one 0x00 byte, id")
    try:
        topic, timer_id = parts[0].decode(), parts[1].decode()
        validate_name("topic", topic)
        validate_name("id", timer_id)
    except UnicodeDecodeError:
        raise ValueError("a name is not ASCII text") from None
    except InvalidInputError as exc:
        raise ValueError(exc.message) from None
    return topic, timer_id


def _check_timer(key: bytes, value: bytes, limits: RecordLimits) -> None:
    """ValueError naming the rule the entry breaks, if it breaks one."""
    if len(key) < 11:
        raise ValueError("a timers key is a key time (8 bytes), topic, 0x00 and id")
    _names(key[8:])
    try:
        record = records.decode_record(value)
    except msgspec.DecodeError as exc:  # ValidationError included
        raise ValueError(f"the value does not decode as a timer record ({exc})") from None
    try:
        check_record(record, layout.timer_key_ms(key), limits)
    except InvalidInputError as exc:
        raise ValueError(exc.message) from None


def _timers_fit(chunk: list[tuple[bytes, bytes]], limits: RecordLimits) -> bool:
    """Whether every entry keeps the rules, in C-level calls over the chunk
    (``records_fit``); ``_check_timer`` then names what broke."""
    keys = [key for key, _ in chunk]
    if min(map(len, keys)) < 11 or not all_valid_idents([key[8:] for key in keys]):
        return False
    try:
        found = records.decode_records([value for _, value in chunk])
    except msgspec.DecodeError:
        return False
    key_times = struct.unpack(f">{len(keys)}Q", b"".join([key[:8] for key in keys]))
    return records_fit(found, key_times, limits)


def _ids_fit(chunk: list[tuple[bytes, bytes]]) -> bool:
    return all(len(value) == 8 for _, value in chunk) and all_valid_idents(
        [ident for ident, _ in chunk]
    )


def check_staged(
    staged: Staged,
    entries: dict[tuple[str, str], int],
    pending_by_topic: dict[str, int],
    limits: RecordLimits,
) -> None:
    """Check every staged entry (see the module docstring) against the manifest's
    ``entries`` per ``(family, path)`` and its ``pending_by_topic``.

    That each ``ids`` entry has its timer and each timer its ``ids`` entry is checked by
    equal counts and an equal sum of the (identity, key time) pairs' hashes (``hash`` is
    keyed per process); only when they differ are the timers looked up one by one, to
    name the first identity without its timer.
    """
    timers, ids = _check_timers(staged.timers, limits), _check_ids(staged.ids)
    for family, tally in (("timers", timers), ("ids", ids)):
        for path, count in zip(staged.families[family].paths, tally.counts, strict=True):
            if entries.get((family, path)) != count:
                raise _refused(
                    f"staged file {path} holds {count} entries, the manifest says "
                    f"{entries.get((family, path))}"
                )
    if ids.digest != timers.digest:
        _find_missing_timer(staged)
        raise _refused("the staged ids and timers files do not hold the same timers")
    for topic in ids.topics.keys() | pending_by_topic.keys():
        if ids.topics[topic] != pending_by_topic.get(topic, 0):
            raise _refused(
                f"the staged files hold {ids.topics[topic]} timers of topic {topic}, the "
                f"manifest's pending_by_topic says {pending_by_topic.get(topic, 0)}"
            )


def _refused(reason: str) -> InvalidInputError:
    return InvalidInputError(f"{reason}; nothing was ingested", field="stage_dir")


class _Tally:
    """A family's entries per file, the sum of its pairs' hashes, its timers per topic."""

    def __init__(self) -> None:
        self.counts: list[int] = []
        self.digest = 0
        self.topics = Counter[str]()


def _check_timers(family: StagedFamily, limits: RecordLimits) -> _Tally:
    tally = _Tally()
    for index, path in enumerate(family.paths):
        count = 0
        for chunk in family.items(index):
            if not _timers_fit(chunk, limits):
                for key, value in chunk:
                    try:
                        _check_timer(key, value, limits)
                    except ValueError as exc:
                        raise _bad(path, key, str(exc)) from None
            tally.digest += sum(map(hash, [key[8:] + key[:8] for key, _ in chunk]))
            count += len(chunk)
        tally.counts.append(count)
    return tally


def _check_ids(family: StagedFamily) -> _Tally:
    tally = _Tally()
    for index, path in enumerate(family.paths):
        count = 0
        for chunk in family.items(index):
            if not _ids_fit(chunk):
                for ident, value in chunk:
                    try:
                        _names(ident)
                    except ValueError as exc:
                        raise _bad(path, ident, str(exc)) from None
                    if len(value) != 8:
                        raise _bad(path, ident, "an ids value is the timer's 8-byte key time")
            tally.digest += sum(map(hash, [ident + value for ident, value in chunk]))
            _count_topics([ident for ident, _ in chunk], tally.topics)
            count += len(chunk)
        tally.counts.append(count)
    return tally


def _count_topics(idents: list[bytes], topics: Counter[str]) -> None:
    """Add the sorted, valid ``idents`` per topic: each topic is one run of them."""
    i = 0
    while i < len(idents):
        topic = idents[i][: idents[i].index(layout.SEPARATOR)]
        end = bisect.bisect_left(idents, topic + b"\x01", i)
        topics[topic.decode()] += end - i
        i = end


def _find_missing_timer(staged: Staged) -> None:
    """Raise naming the first ``ids`` entry whose timer the staged files do not hold."""
    for path, cf in zip(staged.ids.paths, staged.ids.cfs, strict=True):
        for chunk in StagedFamily.chunks_of(cf):
            keys = [value + ident for ident, value in chunk]
            for (ident, value), found in zip(chunk, staged.timers.lookup(keys), strict=True):
                if found is None:
                    when = layout.read_u64(value)
                    raise _bad(path, ident, f"no staged timer has this identity at key time {when}")
