"""The due-time bucket count (``reads.count_keys_before``) against a plain model.

A real RocksDB family in a temp dir holds timer keys at random times; every list of
ascending deadlines and every cap must give the model's cumulative counts: keys at or
after ``start`` and below each deadline, each at most ``cap``.
"""

from __future__ import annotations

import bisect
import tempfile

import rocksdict as rd
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.rocks import keys as layout
from storage.rocks.reads import count_keys_before

BASE_MS = 1_700_000_000_000
times = st.lists(st.integers(0, 5_000), max_size=300)
deadlines = st.lists(st.integers(-100, 5_200), max_size=7).map(sorted)


def model(key_times: list[int], start: int, limits: list[int], cap: int) -> list[int]:
    kept = sorted(t for t in key_times if t >= start)
    return [min(bisect.bisect_left(kept, limit), cap) for limit in limits]


@settings(max_examples=60, deadline=None)
@given(times, st.integers(0, 3_000), deadlines, st.integers(1, 400))
def test_counts_match_the_model(key_times, start, limits, cap):
    with tempfile.TemporaryDirectory() as path:
        options = rd.Options(raw_mode=True)
        options.create_if_missing(True)
        db = rd.Rdict(path, options=options)
        try:
            batch = rd.WriteBatch(raw_mode=True)
            for i, t in enumerate(key_times):  # several keys may share one time
                batch.put(layout.timer_key(BASE_MS + t, b"orders", b"id%d" % i), b"r")
            db.write(batch)
            got = count_keys_before(
                db, layout.u64(BASE_MS + start), [BASE_MS + d for d in limits], cap
            )
        finally:
            db.close()
    assert got == model(key_times, start, limits, cap)
