"""The analysis on a history small enough to check by hand: ten deliveries, one in each
of ten consecutive seconds, 10 to 100 ms late. One a second is the mean and the peak (the
mean divided by the 9 s between the first and the last delivery said 1.1 a second, above
the peak); the percentiles are numpy's linear ones worked out by hand."""

from __future__ import annotations

import pytest

from pipeline.analyze import analyze
from pipeline.deliveries import write_deliveries

pytestmark = pytest.mark.spark

T0 = 1_700_000_040_000  # a minute boundary


def test_one_delivery_a_second_for_ten_seconds_is_one_a_second(spark, tmp_path):
    rows = []
    for i in range(10):
        delivered = T0 + i * 1000 + 500
        requested = delivered - (i + 1) * 10
        rows.append(("t", f"i{i}", requested, requested, delivered, 1, "rocks", requested - 5000))
    write_deliveries(str(tmp_path / "deliveries"), rows)
    a = analyze(spark, str(tmp_path / "deliveries"), str(tmp_path / "report"))
    assert (a.overall.deliveries, a.overall.early) == (10, 0)
    # lateness 10, 20, ..., 100: p50 between 50 and 60, p90 at rank 8.1, p99 at rank 8.91
    assert (a.overall.p50_ms, a.overall.p90_ms, a.overall.p99_ms, a.overall.max_ms) == (
        pytest.approx(55.0),
        pytest.approx(91.0),
        pytest.approx(99.1),
        100,
    )
    assert (a.first_delivered_ms, a.last_delivered_ms) == (T0 + 500, T0 + 9500)
    assert (a.mean_per_s, a.peak_per_s) == (1.0, 1)
