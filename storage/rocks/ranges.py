"""Deliveries committed by one page (format 3): from a timer key to its delivered facts.

A batch whose due scan saw one clean key range above every earlier such range writes its
delivered facts as a ``DeliveredPage`` in the journal and one ``ranges`` entry (first
timer key -> journal key | last timer key), and leaves ``ids`` holding the pending key
time (``storage.rocks.keys``). The ranges are disjoint and ascending, so the one entry at
or before a key is the only page that can hold it, and the page's keys are sorted.
"""

from __future__ import annotations

import bisect

import rocksdict as rd

from storage import records
from storage.errors import StoreCorruptError
from storage.rocks import keys as layout


def delivered_by_range(
    ranges_cf: rd.Rdict, journal_cf: rd.Rdict, key: bytes
) -> records.DeliveredRecord | None:
    """The delivered record of timer ``key`` when a range page committed it, else None."""
    it = ranges_cf.iter()
    it.seek_for_prev(key)
    value = it.value() if it.valid() else None
    del it
    if value is None:
        return None
    journal_key, last_key = layout.split_range_value(value)
    if key > last_key:
        return None
    raw = journal_cf.get(journal_key)
    if raw is None:
        return None  # expired between the two lookups
    page = records.decode_journal_page(raw)
    if not isinstance(page, records.DeliveredPage):  # written and expired together
        raise StoreCorruptError(f"the range holding {key!r} leads to a journal page of idents")
    index = bisect.bisect_left(page.keys, key)
    if index == len(page.keys) or page.keys[index] != key:
        return None
    return page.delivered(index, layout.read_u64(journal_key))
