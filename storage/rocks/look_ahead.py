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
"""

from __future__ import annotations

from typing import NamedTuple

import rocksdict as rd

NO_KEY = b"\xff" * 9  # above every timer key: key times are far below 2**64 ms


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
        it = timers.iter()
        it.seek(scan_from)
        next_key = it.key() if it.valid() else NO_KEY
        del it
        self._seen = _Seen(next_key, scan_from, sequence)

    def forget(self) -> None:
        self._seen = None
