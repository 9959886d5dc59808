"""The shared core of the RocksDB store: one owner of the state every module needs.

Concurrency: every operation that reads-then-writes timer state (schedule, cancel, due,
commit, retry, dead-letter, release, ingest) holds ``core.lock``, and so does every write
of housekeeping: the watermark advance together with the range delete below it, the
expiry of delivered records and of each topic's log. Only housekeeping's compaction and
its reads of the topic log's pages run without it (compaction changes no value). That
makes the in-flight set, the counters and the scan cursor exact, and it closes the
classic races: a cancel cannot remove a timer the scanner is handing out at the same
moment, a watermark advance cannot overtake a past-due schedule that is being clamped to
it, and the range delete cannot remove keys an ingest has just linked below the
watermark and not yet moved up. Each operation reads ``handles`` under the lock, so one
that waited for the lock while ``close`` took it raises StoreClosedError. Reads that
take no lock go through ``reading()``, which ``close`` waits for.

The scan cursor (``scan_from``) is the first key the next due scan looks at: every key
below it is in flight or deleted, so the scanner never wades through the tombstones of
delivered timers. A past-due schedule is clamped to a key time at or after the cursor
(see ``clamp_floor_ms``), so it cannot land behind the scanner. The persisted watermark
is where a restarted store starts; housekeeping advances it to the first live key and
range-deletes and compacts everything below it.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import rocksdict as rd

from storage.errors import StoreClosedError
from storage.rocks import keys as layout
from storage.rocks.counters import DEAD_LETTERS_COUNTED_KEY, CounterDelta, Counters
from storage.rocks.db import (
    RocksHandles,
    RocksSettings,
    WriteHealth,
    iter_keys,
    multi_get,
    open_db,
    write_batch,
)
from storage.rocks.look_ahead import LookAhead

# how far a writer's time may lie behind the scan cursor before it is taken for a clock
# stepped back (see RocksCore.follow_clock): a request's time is read before it waits
# for the lock, so it may be older than the scanner's last scan by that wait
CLOCK_STEP_TOLERANCE_MS = 1_000


class RocksCore:
    """The open database, the lock, the counters, the in-flight set and the scan cursor."""

    def __init__(self, settings: RocksSettings) -> None:
        self.settings = settings
        self._h: RocksHandles | None = open_db(settings)
        self.lock = threading.Lock()
        self._readers = 0  # reads in progress that take no lock (see reading())
        self._readers_changed = threading.Condition()
        self.counters = Counters.load(self._h.cfs["meta"])
        self.in_flight: set[bytes] = set()
        self.scan_from = layout.u64(self.counters.watermark_ms)
        # first key -> (last key, count) of due batches whose scanned range held nothing
        # but their own keys: committed whole, they are removed by one delete_range
        self.clean_ranges: dict[bytes, tuple[bytes, int]] = {}
        # the last timer key of the highest range committed by one page (storage.rocks.keys):
        # a pending-looking ids entry above it cannot have been delivered that way
        self.indexed_until = _last_range_key(self._h.cfs["ranges"])
        self.look_ahead = LookAhead()  # what the last empty due scan saw ahead of the cursor
        self._count_dead_letters_once()

    def _count_dead_letters_once(self) -> None:
        """Set ``dead_lettered`` to the dead-letter family's entries, once per directory.

        Before 2026-11-24 an identity dead-lettered twice (scheduled again in between)
        counted twice; the count now moves with the entries, and this repairs a directory
        written before, at its first open (one key walk of a family that holds only what
        nobody replayed or purged).
        """
        h = self.handles
        if h.cfs["meta"].get(DEAD_LETTERS_COUNTED_KEY) is not None:
            return
        options = rd.ReadOptions()
        options.fill_cache(False)  # type: ignore[call-arg]  # the stub lacks the bool
        entries = sum(1 for _ in iter_keys(h.cfs["deadletter"], b"", options))
        delta = self.delta()
        delta.totals["dead_lettered"] = entries - self.counters.totals.get("dead_lettered", 0)
        batch = rd.WriteBatch(raw_mode=True)
        batch.put(DEAD_LETTERS_COUNTED_KEY, layout.u64(1), h.handles["meta"])
        self.write(batch, delta)

    @property
    def handles(self) -> RocksHandles:
        if self._h is None:
            raise StoreClosedError("the store is closed")
        return self._h

    @property
    def closed(self) -> bool:
        return self._h is None

    def write(self, batch: rd.WriteBatch, delta: CounterDelta | None = None) -> None:
        """Write one atomic batch with the counter changes staged into it (the lock held
        when there are any); StoreFullError when the disk is full (``h.health`` notes it)."""
        h = self.handles
        if delta is not None:
            delta.stage(batch, h.handles["meta"])
        write_batch(h, batch)
        if delta is not None:
            delta.apply()

    def delta(self) -> CounterDelta:
        return CounterDelta(self.counters)

    def clamp_floor_ms(self) -> int:
        """The earliest key time a new timer may get without landing behind the scanner."""
        floor_ms = layout.timer_key_ms(self.scan_from)
        return floor_ms if len(self.scan_from) == 8 else floor_ms + 1

    def follow_clock(self, now_ms: int, tolerance_ms: int = 0) -> int:
        """The clamp floor for work done at ``now_ms`` (lock held), after lowering the scan
        cursor, and the watermark with it, to ``now_ms + 1`` when the clock has stepped back
        more than ``tolerance_ms`` below them.

        Without this a clock stepped back by an hour delays every new timer by that hour:
        new keys clamp to the cursor, which keeps the old time. Lowering is safe: every key
        below the old cursor is in flight or deleted, so the scanner walks those tombstones
        once more and skips its in-flight keys; ``rewind_cursor`` forgets the clean ranges
        a new key may now land in; and the watermark follows at once, or housekeeping's
        range delete below it (and a restart's scan from it) would lose a key written
        under it. The scanner calls this with no tolerance (its clock only moves back
        when the system clock does); writers with a tolerance, since a request's time may
        be a little older than the scanner's last scan.
        """
        floor_ms = self.clamp_floor_ms()
        if floor_ms <= now_ms + 1 + tolerance_ms:
            return floor_ms
        floor_ms = now_ms + 1
        self.rewind_cursor(layout.u64(floor_ms))
        if self.counters.watermark_ms > floor_ms:
            delta = self.delta()
            delta.watermark_ms = floor_ms
            self.write(rd.WriteBatch(raw_mode=True), delta)
        return floor_ms

    def delivered_in_ranges(self, keys: list[bytes]) -> set[bytes]:
        """Of these timer keys (an ``ids`` key time joined with its ident, not in flight),
        those delivered by a committed range: no read at all for keys above every range,
        one multi-get of ``timers`` for the rest (delivered when the key is gone)."""
        maybe = [key for key in keys if key <= self.indexed_until]
        if not maybe:
            return set()
        values = multi_get(self.handles.cfs["timers"], maybe)
        return {key for key, value in zip(maybe, values, strict=True) if value is None}

    def rewind_cursor(self, key: bytes) -> None:
        """Let the scanner see ``key`` again (released or ingested below the cursor)."""
        if key < self.scan_from:
            self.scan_from = key
            self.clean_ranges.clear()  # new keys may now land inside a scanned range

    def note_key_written(self, key: bytes) -> None:
        """A timer key was written outside schedule's clamp (retry, ingest): keep it safe."""
        self.look_ahead.forget()  # an SST ingest need not raise the sequence number
        if key < self.scan_from:
            self.clean_ranges.clear()

    def take_clean_range(self, keys: list[bytes]) -> tuple[bytes, bytes] | None:
        """``[first, after_last)`` when ``keys`` are exactly one clean due batch, in key order.

        The order matters: a range's page is searched by bisection, and a webhook lane
        settles a batch in the order its POSTs answered, which may keep the first and last
        keys in place and swap the ones between.
        """
        if not keys:
            return None
        scanned = self.clean_ranges.pop(keys[0], None)
        if scanned is None or scanned != (keys[-1], len(keys)):
            return None
        if keys != sorted(keys):  # a batch's keys are distinct: sorted means ascending
            return None
        return keys[0], keys[-1] + layout.SEPARATOR

    def settle(self, keys: list[bytes]) -> None:
        """Keys leave the in-flight set (committed, retried, dead-lettered, released)."""
        self.in_flight.difference_update(keys)
        if keys:
            self.clean_ranges.pop(keys[0], None)
        if not self.in_flight:
            self.clean_ranges.clear()

    def control_parts(self) -> tuple[rd.Rdict, rd.Rdict, rd.WriteOptions]:
        """(database, the ``control`` family, write options) for ``storage.rocks.control``."""
        h = self.handles
        return h.db, h.cfs["control"], h.write_options

    @property
    def write_health(self) -> WriteHealth:
        return self.handles.health

    @contextmanager
    def reading(self) -> Iterator[RocksHandles]:
        """The handles, for a read that does not take ``lock`` (get, listings, the topic
        log): ``close`` waits until every such read is done, and one that starts after
        ``close`` began raises StoreClosedError. A read inside must not take ``lock``."""
        with self._readers_changed:
            h = self.handles
            self._readers += 1
        try:
            yield h
        finally:
            with self._readers_changed:
                self._readers -= 1
                self._readers_changed.notify_all()

    def close(self) -> None:
        with self.lock:
            with self._readers_changed:
                h, self._h = self._h, None  # from here every call raises StoreClosedError
                self._readers_changed.wait_for(lambda: not self._readers)
            if h is not None:
                h.close()
        # RocksDB keeps the LOCK while any column-family handle lives, and a handled error's
        # traceback keeps the frames (and their handles) alive in a cycle until the cyclic
        # collector runs: collect now, so a reopen in the same process succeeds.
        gc.collect()


def _last_range_key(ranges: rd.Rdict) -> bytes:
    """The last timer key of the highest committed range (b"" when there is none)."""
    it = ranges.iter()
    it.seek_to_last()
    last = layout.split_range_value(it.value())[1] if it.valid() else b""
    del it
    return last
