"""An ingest checks every staged entry before any goes in (issue 36, part 1): a file RocksDB
cannot read, or a record the API would refuse, is a 422 naming the file and the key, and
the store is left as it was. Real RocksDB in tmp_path, a real server for the HTTP answers.
"""

from __future__ import annotations

import os
import random
from collections import Counter
from pathlib import Path

import httpx
import pytest

from pipeline.rows import JobTimes, encode_row
from storage.errors import InvalidInputError
from storage.rocks import RocksSettings, RocksTimerStore
from storage.rocks import keys as layout
from storage.rocks.ingest import SST_MAGIC, Manifest, StagedFile, write_manifest
from storage.rules import RecordLimits
from tests.api.helpers import ThreadServer, make_settings, now_ms
from tests.pipeline.helpers import LIMITS, NOW, family_items, row, stage, stage_pairs

ADMIN = {"Authorization": "Bearer adm"}


@pytest.fixture
def store(tmp_path):
    s = RocksTimerStore(RocksSettings(str(tmp_path / "rocks")))
    yield s
    s.close()


def encoded(rows: list[dict], now: int = NOW) -> tuple[dict[str, list], dict[str, int]]:
    """The two families' sorted pairs of ``rows`` and the per-topic counts."""
    found = [encode_row(r, JobTimes(now, now, 0), LIMITS) for r in rows]
    return (
        {
            "ids": sorted((e.ident_key, e.ids_value) for e in found),
            "timers": sorted((e.timer_key, e.timer_value) for e in found),
        },
        dict(Counter(e.topic for e in found)),
    )


def with_bad_value(stage_dir: Path, value: bytes = b"\xc1") -> bytes:
    """Three timers due now, the second one's stored value replaced by ``value``."""
    families, topics = encoded([row("o", f"t{i}", NOW - 10 + i) for i in range(3)])
    key = families["timers"][1][0]
    families["timers"][1] = (key, value)
    stage_pairs(stage_dir, families, topics, parts=1)
    return key


def sst_lookalike(stage_dir: Path) -> None:
    """Random bytes that end with the SST footer's magic number, listed as a timers file."""
    (stage_dir / "timers").mkdir(parents=True)
    data = random.Random(36).randbytes(4096) + SST_MAGIC
    (stage_dir / "timers" / "part-00000.sst").write_bytes(data)
    f = StagedFile("timers", "timers/part-00000.sst", 1, len(data), "00", "ff")
    g = StagedFile("ids", "timers/part-00000.sst", 1, len(data), "00", "ff")
    write_manifest(str(stage_dir), Manifest(NOW, 0, [f, g], {"o": 1}))


def assert_untouched(store: RocksTimerStore) -> None:
    assert family_items(store, "timers") == [] and family_items(store, "ids") == []
    assert store.stats().pending == 0


def test_a_value_that_does_not_decode_is_refused_naming_the_file_and_key(tmp_path, store):
    key = with_bad_value(tmp_path / "stage")
    with pytest.raises(InvalidInputError) as caught:
        store.ingest_staged(str(tmp_path / "stage"), limits=LIMITS)
    message = caught.value.message
    assert "timers/part-00000.sst" in message and key.hex() in message, message
    assert "does not decode as a timer record" in message and caught.value.field == "stage_dir"
    assert_untouched(store)
    assert os.path.exists(tmp_path / "stage" / "timers" / "part-00000.sst")  # not moved in
    assert [p for p in os.listdir(tmp_path / "stage") if p.startswith(".")] == []  # no scratch


def test_a_file_rocksdb_cannot_read_is_refused_by_name(tmp_path, store):
    sst_lookalike(tmp_path / "stage")
    with pytest.raises(InvalidInputError) as caught:
        store.ingest_staged(str(tmp_path / "stage"), limits=LIMITS)
    assert "part-00000.sst" in caught.value.message and "cannot read" in caught.value.message
    assert_untouched(store)


def _break(rule: str, families: dict[str, list], topics: dict[str, int]) -> bytes:
    """Break ``rule`` in the staged pairs; return the key the refusal must name."""
    timers, ids = families["timers"], families["ids"]
    key, value = timers[0]
    if rule == "early":  # the key time before the requested time: an early delivery
        early = layout.u64(layout.timer_key_ms(key) - 1) + key[8:]
        timers[0] = (early, value)
        ids[[i for i, _ in ids].index(key[8:])] = (key[8:], early[:8])
        return early
    if rule == "name":
        bad = key[:8] + b"o\x00bad id"
        timers[0] = (bad, value)
        return bad
    if rule == "ids":  # an identity whose timer the staged files do not hold
        ident, when = ids[0]
        ids[0] = (ident, layout.u64(layout.read_u64(when) + 1))
        return ident
    raise AssertionError(rule)


@pytest.mark.parametrize(
    ("rule", "words"),
    [
        ("early", "delivered early"),
        ("name", "id may contain only"),
        ("ids", "no staged timer has this identity"),
    ],
)
def test_each_rule_of_a_schedule_holds_for_staged_entries(tmp_path, store, rule, words):
    families, topics = encoded([row("o", f"t{i}", NOW + 100 + i) for i in range(5)])
    key = _break(rule, families, topics)
    for pairs in families.values():
        pairs.sort()
    stage_pairs(tmp_path / "stage", families, topics, parts=1)
    with pytest.raises(InvalidInputError) as caught:
        store.ingest_staged(str(tmp_path / "stage"), limits=LIMITS)
    assert words in caught.value.message and key.hex() in caught.value.message
    assert_untouched(store)


def test_the_limits_and_the_per_topic_counts_are_checked(tmp_path, store):
    stage(tmp_path / "big", [row("o", "a", NOW + 100, "x" * 20)])
    small = RecordLimits(max_payload_bytes=10, max_headers=64, max_headers_bytes=16 << 10)
    with pytest.raises(InvalidInputError, match="payload must be at most 10 bytes, got 20"):
        store.ingest_staged(str(tmp_path / "big"), limits=small)
    families, _ = encoded([row("o", "a", NOW + 100), row("p", "b", NOW + 100)])
    stage_pairs(tmp_path / "counts", families, {"o": 2}, parts=1)  # its totals agree
    with pytest.raises(InvalidInputError, match="timers of topic"):
        store.ingest_staged(str(tmp_path / "counts"), limits=LIMITS)
    assert_untouched(store)
    assert store.ingest_staged(str(tmp_path / "big"), limits=LIMITS).added == 1


@pytest.fixture
def server(tmp_path):
    data_dir = tmp_path / "live"
    srv = ThreadServer(make_settings(data_dir, admin_keys=["adm"], engine={"tick_ms": 5}))
    client = httpx.Client(base_url=srv.start(), timeout=60, headers=ADMIN)
    yield client, data_dir
    client.close()
    srv.stop()


def test_the_api_answers_422_for_both_files_and_the_store_keeps_serving(server):
    client, data_dir = server
    key = with_bad_value(data_dir / "staging" / "bad")
    sst_lookalike(data_dir / "staging" / "noise")
    stage(data_dir / "staging" / "good", [row("o", "ok", now_ms() + 100)])
    for stage_dir, words in (("bad", key.hex()), ("noise", "cannot read")):
        r = client.post("/v1/admin/ingest", json={"stage_dir": stage_dir})
        assert r.status_code == 422, r.text
        error = r.json()["error"]
        assert error["field"] == "stage_dir" and "part-00000.sst" in error["message"]
        assert words in error["message"]
    stats = client.get("/v1/stats")
    assert stats.status_code == 200 and stats.json()["pending"] == 0
    r = client.post("/v1/admin/ingest", json={"stage_dir": "good"})
    assert r.status_code == 200 and r.json()["added"] == 1, r.text
