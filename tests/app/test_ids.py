"""Server-made timer ids: fixed-width lowercase hex, creation order is byte order, no repeats."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from app.timer_requests import IdMaker, hex_ids

ID = re.compile(r"[0-9a-f]{32}")


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 50)), min_size=1, max_size=20))
def test_ids_are_sorted_unique_and_carry_their_millisecond(steps):
    maker, now_ms, made = IdMaker(), 1_700_000_000_000, []
    for advance_ms, count in steps:  # several calls may fall in one millisecond
        now_ms += advance_ms
        ids = maker.make(now_ms, count)
        assert len(ids) == count
        assert all(ID.fullmatch(i) and int(i[:12], 16) == now_ms for i in ids)
        made += ids
    assert made == sorted(made) and len(set(made)) == len(made)


def test_the_counter_part_counts_up_by_one_within_a_millisecond():
    maker = IdMaker()
    first, second = maker.make(5, 2), maker.make(5, 1)
    counters = [int(i[12:], 16) for i in first + second]
    assert counters == [counters[0], counters[0] + 1, counters[0] + 2]


@given(st.integers(0, 2**128 - 2**17), st.integers(0, 70_000))
def test_hex_ids_are_each_number_in_32_hex_digits(first, count):
    assert hex_ids(first, count) == ["%032x" % (first + i) for i in range(count)]


def test_hex_ids_carry_into_the_high_digits_at_a_run_boundary():
    first = (7 << 16) - 2  # the last two ids of one run, then the next run
    assert hex_ids(first, 4) == [f"{n:032x}" for n in range(first, first + 4)]
    assert hex_ids(2**128 - 3, 3)[-1] == "f" * 32
