"""Reading the delivery journal of a RocksDB store from outside the service.

Opened read-only (no LOCK), so an export can run beside a live server; it sees what was
written when it opened. The journal's layout is ``storage.rocks.keys``'s: one page per
committed batch under ``u64be(delivered ms) | u64be(sequence)``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import rocksdict as rd

from storage import records
from storage.errors import StoreOpenError
from storage.rocks.reads import journal_entries


def read_journal(path: str, since_ms: int = 0) -> Iterator[records.JournalEntry]:
    """Every delivery journalled at or after ``since_ms``, in delivery order."""
    if not os.path.isdir(path):
        raise StoreOpenError(f"no RocksDB store at {path}")
    try:
        # the families on disk: a format-2 directory has no ranges until a store opens it
        families = {name: rd.Options(raw_mode=True) for name in rd.Rdict.list_cf(path)}
        db = rd.Rdict(
            path,
            rd.Options(raw_mode=True),
            column_families=families,
            access_type=rd.AccessType.read_only(False),
        )
    except Exception as exc:  # the binding raises a bare Exception for every RocksDB error
        raise StoreOpenError(f"cannot open the RocksDB store in {path} read-only: {exc}") from exc
    try:
        journal, ids = db.get_column_family("journal"), db.get_column_family("ids")
        yield from journal_entries(journal, ids, since_ms)
        del journal, ids
    finally:
        db.close()
