"""What an empty due scan saw ahead of the cursor, so the next ones need not read at all.

The scanner asks every 10 ms, and most asks on an idle store (or on a cluster node's idle
partitions, five or six of them per node) find nothing: each still made a RocksDB
iterator and a seek, about 5% of a cluster node's CPU while it takes batches. After a
scan that saw no key below its bound, ``LookAhead`` notes the first timer key at or above
the cursor and the database's sequence number. Until that key is due, a later scan can
answer "nothing" without an iterator, as long as nothing could have added a key below it:

- every write (a schedule, a retry, a replay, the cluster's replay of its changelog,
  anything else) raises the sequence number, and the note is then stale;
- a cursor moved back (a release, a clock stepped back) is below the cursor the note was
  taken from, and the note does not hold for it;
- an SST ingest may link files in without raising the sequence number: it drops the note
  (``RocksCore.note_key_written`` calls ``forget``).

The seek for the first key ahead has no upper bound, so it steps over every deleted key
between the cursor and the next live one. Cancels delete point by point: after a batch
cancel of 200,000 timers due in an hour (nothing live after them), each note walked
their tombstones (15 ms a seek), every 10 ms tick after any write, and the scanner took
63% of the server's CPU (a batch cancel over HTTP fell from about 148,000 to 18,000 to
44,000 a second). So the seek gives up after ``MAX_SKIPPED_KEYS`` deleted keys
(RocksDB's ``max_skippable_internal_keys``) and nothing is noted: the next scans read as
they did before the look ahead, bounded by ``now``, until compaction drops the
tombstones or a live key comes closer.
"""

from __future__ import annotations

from typing import NamedTuple

import rocksdict as rd

NO_KEY = b"\xff" * 9  # above every timer key: key times are far below 2**64 ms
MAX_SKIPPED_KEYS = 1000  # a seek over this many deleted keys gives up (about 50 us)


class _Seen(NamedTuple):
    next_key: bytes  # the first timer key at or above ``scan_from`` (NO_KEY: none)
    scan_from: bytes  # the cursor it was seen from
    sequence: int  # the database's last sequence number before the seek


class LookAhead:
    """Owned by ``RocksCore``; every method runs under the core's lock."""

    def __init__(self) -> None:
        self._seen: _Seen | None = None

    def nothing_below(self, db: rd.Rdict, scan_from: bytes, bound: bytes) -> bool:
        """True when no timer key lies in ``[scan_from, bound)`` by the last note."""
        seen = self._seen
        return (
            seen is not None
            and bound <= seen.next_key
            and scan_from >= seen.scan_from
            and db.latest_sequence_number() == seen.sequence
        )

    def note(self, db: rd.Rdict, timers: rd.Rdict, scan_from: bytes) -> None:
        """After a scan that saw no key below its bound: the first key from the cursor on."""
        sequence = db.latest_sequence_number()  # before the seek: a write after it is seen
        options = rd.ReadOptions()  # must outlive the iterator
        options.set_max_skippable_internal_keys(MAX_SKIPPED_KEYS)
        it = timers.iter(options)
        it.seek(scan_from)
        if it.valid():
            next_key = it.key()
        elif _gave_up(it):  # too many deleted keys ahead: note nothing
            self._seen = None
            return
        else:
            next_key = NO_KEY
        del it
        self._seen = _Seen(next_key, scan_from, sequence)

    def forget(self) -> None:
        self._seen = None


def _gave_up(it: rd.RdictIter) -> bool:
    """Whether an iterator that is not valid stopped at ``max_skippable_internal_keys``
    (RocksDB's Incomplete status) rather than at the end of the family."""
    try:
        it.status()
    except Exception as exc:  # the binding raises a bare Exception for every status
        if "incomplete" in str(exc).lower():
            return True
        raise
    return False
