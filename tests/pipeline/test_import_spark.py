"""The bulk import on a real local Spark session: ~100,000 timers with invalid rows and
duplicates, compared byte for byte with what ``RocksTimerStore.schedule`` writes, then
delivered by the engine on a fake clock."""

from __future__ import annotations

import base64
import random
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from app.clock import FakeClock
from app.engine import Engine, EngineSettings
from pipeline.importer import run_import
from pipeline.rows import JobTimes
from storage.protocol import NewTimer
from storage.rocks import RocksSettings, RocksTimerStore
from tests.pipeline.helpers import LIMITS, NOW, family_items, pending_from_meta

pytestmark = pytest.mark.spark

VALID = 100_000
SPAN_MS = 600_000  # every timer falls due within ten minutes of NOW
TOPICS = ["orders", "payments", "mail.retry", "jobs:nightly", "x-1"]
INVALID = [  # (row fields, expected reason fragment)
    ({"topic": "bad topic", "id": "a", "deliver_at_ms": NOW}, "topic may contain only"),
    ({"topic": "orders", "id": "", "deliver_at_ms": NOW}, "id must be 1 to 128 bytes"),
    ({"topic": "orders", "id": "é", "deliver_at_ms": NOW}, "id may contain only"),
    ({"topic": "o" * 129, "id": "a", "deliver_at_ms": NOW}, "topic must be 1 to 128"),
    ({"topic": "orders", "id": "a"}, "exactly one of deliver_at_ms and delay_ms"),
    ({"topic": "orders", "id": "a", "deliver_at_ms": NOW, "delay_ms": 5}, "exactly one of"),
    ({"topic": "orders", "id": "a", "delay_ms": -5}, "delay_ms must be between"),
    (
        {"topic": "orders", "id": "a", "deliver_at_ms": NOW, "payload_b64": "***"},
        "not valid base64",
    ),
    (
        {"topic": "orders", "id": "a", "deliver_at_ms": NOW, "payload": "x", "payload_b64": "eA=="},
        "not both",
    ),
]
SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("id", pa.string()),
        ("deliver_at_ms", pa.int64()),
        ("delay_ms", pa.int64()),
        ("payload", pa.string()),
        ("payload_b64", pa.string()),
        ("headers", pa.map_(pa.string(), pa.string())),
    ]
)


def generate(path, rng: random.Random):
    """Rows in file order, the expected winners, and the expected rejects by row number."""
    rows, winners, rejects = [], {}, {}
    for i in range(VALID):
        topic, tid = TOPICS[i % len(TOPICS)], f"t{i:06d}"
        r = {"topic": topic, "id": tid, "headers": {"n": str(i)} if i % 3 else None}
        if i % 4 == 0:
            r["delay_ms"] = rng.randrange(SPAN_MS)
        else:
            r["deliver_at_ms"] = NOW + rng.randrange(SPAN_MS)
        if i % 5 == 0:
            r["payload_b64"] = base64.b64encode(rng.randbytes(rng.randrange(40))).decode()
        elif i % 7:
            r["payload"] = f"payload {i} ✓"
        rows.append(r)
        if i % 97 == 0:  # an invalid row now and then
            fields, reason = INVALID[(i // 97) % len(INVALID)]
            rows.append(fields)
            rejects[len(rows)] = reason
    for i in range(0, VALID, 211):  # later rows for known identities: the last one wins
        rows.append({"topic": TOPICS[i % len(TOPICS)], "id": f"t{i:06d}", "deliver_at_ms": NOW + 7})
    rows.append({"topic": "big", "id": "a", "delay_ms": 1, "payload": "x" * ((1 << 20) + 1)})
    rejects[len(rows)] = "more than 1048576"
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    pq.write_table(table, path, row_group_size=20_000)
    for number, r in enumerate(rows, 1):
        if number not in rejects:
            winners[(r["topic"], r["id"])] = r
    return rows, winners, rejects


def new_timer(r: dict) -> NewTimer:
    deliver_ms = r["deliver_at_ms"] if r.get("deliver_at_ms") is not None else NOW + r["delay_ms"]
    if r.get("payload_b64") is not None:
        payload, binary = base64.b64decode(r["payload_b64"]), True
    else:
        payload, binary = (r.get("payload") or "").encode(), False
    return NewTimer(r["topic"], r["id"], deliver_ms, payload, r.get("headers") or {}, binary)


@pytest.fixture(scope="module")
def imported(spark, tmp_path_factory):
    base = tmp_path_factory.mktemp("import")
    rows, winners, rejects = generate(str(base / "input.parquet"), random.Random(6))
    summary = run_import(
        spark,
        str(base / "input.parquet"),
        str(base / "stage"),
        times=JobTimes(NOW, NOW, 0),
        limits=LIMITS,
        partitions=4,
    )
    store = RocksTimerStore(RocksSettings(str(base / "rocks")))
    report = store.ingest_staged(summary.stage_dir, limits=LIMITS)
    yield {"rows": rows, "winners": winners, "rejects": rejects, "summary": summary}, store, report
    store.close()


def test_counts_are_exact(imported):
    data, store, report = imported
    s = data["summary"]
    valid_rows = len(data["rows"]) - len(data["rejects"])
    assert (s.rows_read, s.rejected) == (len(data["rows"]), len(data["rejects"]))
    assert (s.accepted, s.duplicates) == (valid_rows, valid_rows - VALID)
    assert s.timers == VALID and s.files == 8 and s.bytes > 0
    assert (report.staged, report.added, report.skipped) == (VALID, VALID, 0)
    expected_topics = Counter(t for t, _ in data["winners"])
    assert store.stats().pending_by_topic == dict(expected_topics)


def test_every_timer_has_the_bytes_schedule_writes(imported, tmp_path):
    data, store, _ = imported
    reference = RocksTimerStore(RocksSettings(str(tmp_path / "reference")))
    timers = [new_timer(r) for r in data["winners"].values()]
    for start in range(0, len(timers), 5000):
        reference.schedule(timers[start : start + 5000], NOW)
    try:
        for family in ("timers", "ids"):
            imported_items = family_items(store, family)
            assert len(imported_items) == VALID
            assert imported_items == family_items(reference, family), family
    finally:
        reference.close()
    view = store.get("orders", "t000000")
    assert view is not None and view.deliver_at_ms == NOW + 7  # the later duplicate won


def test_rejects_carry_reason_and_row_number(imported):
    data, _, _ = imported
    table = pq.read_table(data["summary"].rejects_path).to_pylist()
    got = {r["reject_row"]: r for r in table}
    assert sorted(got) == sorted(data["rejects"])
    for number, fragment in data["rejects"].items():
        assert fragment in got[number]["reject_reason"], (number, got[number])
        original = data["rows"][number - 1]
        assert got[number]["topic"] == original.get("topic")
        assert got[number]["reject_file"].endswith("input.parquet")


def test_imported_timers_are_delivered_on_time_and_never_early(imported):
    data, store, _ = imported
    due = sorted((new_timer(r).deliver_at_ms, t, i) for (t, i), r in data["winners"].items())
    clock = FakeClock(NOW - 1)
    engine = Engine(store, clock, EngineSettings(queue_capacity=20_000, scan_batch=2000))
    delivered = 0
    for step_ms in range(0, SPAN_MS + 20_000, 20_000):
        now = NOW + step_ms
        clock.set(now)
        delivered += engine.run_once(now)
        assert delivered == sum(1 for d, _, _ in due if d <= now), now
    assert delivered == VALID
    log = [m for topic in TOPICS for m in store.read_log(topic, 0, VALID)]
    requested = {(t, i): d for d, t, i in due}
    topic_of = {m.id: t for t in TOPICS for m in store.read_log(t, 0, VALID)}
    assert len(log) == VALID
    assert all(m.delivered_at_ms >= requested[(topic_of[m.id], m.id)] for m in log)
    assert all(m.delivered_at_ms - requested[(topic_of[m.id], m.id)] < 20_000 for m in log)
    assert store.stats().pending == 0
    assert not any(pending_from_meta(store).values())


TRICKY = [  # CSV-like text rows: SQL's fast path must never pass what encode_row refuses
    {"topic": "orders", "id": "a", "deliver_at_ms": "12", "delay_ms": None},
    {"topic": "orders", "id": "b", "deliver_at_ms": " 12", "delay_ms": None},
    {"topic": "orders", "id": "c", "deliver_at_ms": "+12", "delay_ms": None},
    {"topic": "orders", "id": "d", "deliver_at_ms": "1_000", "delay_ms": None},
    {"topic": "orders", "id": "e", "deliver_at_ms": "12\n", "delay_ms": None},
    {"topic": "orders\n", "id": "f", "deliver_at_ms": "12", "delay_ms": None},
    {"topic": "orders", "id": "g\n", "deliver_at_ms": "12", "delay_ms": None},
    {"topic": "orders", "id": "h", "deliver_at_ms": "253402300799999", "delay_ms": None},
    {"topic": "orders", "id": "i", "deliver_at_ms": "253402300800000", "delay_ms": None},
    {"topic": "orders", "id": "j", "deliver_at_ms": None, "delay_ms": "5"},
    {"topic": "orders", "id": "k", "deliver_at_ms": "", "delay_ms": "5"},
    {"topic": "orders", "id": "l", "deliver_at_ms": "-1", "delay_ms": None},
    {"topic": "x" * 128, "id": "m", "deliver_at_ms": "1", "delay_ms": None},
    {"topic": "x" * 129, "id": "n", "deliver_at_ms": "1", "delay_ms": None},
    {"topic": "é", "id": "o", "deliver_at_ms": "1", "delay_ms": None},
    {"topic": "orders", "id": "p", "deliver_at_ms": None, "delay_ms": "50000000000000"},
    {"topic": "orders", "id": "q", "deliver_at_ms": None, "delay_ms": "31557600000000"},
    {"topic": "orders", "id": "r", "deliver_at_ms": "١٢", "delay_ms": None},
    {"topic": "orders", "id": "s", "deliver_at_ms": None, "delay_ms": "+5"},
]


def test_sql_prevalidation_passes_only_rows_encode_row_accepts(spark):
    from pipeline.encode import prevalidate
    from pipeline.rows import Rejected, encode_row

    times = JobTimes(NOW, NOW, 0)
    schema = "topic string, id string, deliver_at_ms string, delay_ms string"
    df = prevalidate(spark.createDataFrame([tuple(r.values()) for r in TRICKY], schema), times)
    checked = {r["id"]: (r["_ok"], r["_deliver_ms"]) for r in df.collect()}
    fast = set()
    for r in TRICKY:
        ok, deliver_ms = checked[r["id"]]
        if not ok:
            continue
        fast.add(r["id"])
        try:
            e = encode_row(r, times, LIMITS, "csv")
        except Rejected as exc:
            raise AssertionError(f"SQL passed {r!r}, encode_row: {exc}") from None
        assert deliver_ms == int.from_bytes(e.ids_value, "big"), r
    assert fast == {"a", "h", "j", "m", "q"}  # the rest take encode_row, which decides
