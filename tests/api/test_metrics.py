"""GET /metrics: every family with its type, values that move, the key rule, both stores.

Scrapes are parsed with prometheus-client's own parser. The engine is driven by
``run_once`` on a fake clock, so every count below is exact.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import pytest
from prometheus_client.parser import text_string_to_metric_families

from storage.protocol import DueTimer
from tests.api.helpers import ROOT, FakeApi

COUNTERS = [
    "timerstore_timers_scheduled",
    "timerstore_timers_rescheduled",
    "timerstore_timers_cancelled",
    "timerstore_timers_delivered",
    "timerstore_delivery_failures",
    "timerstore_timers_dead_lettered",
    "timerstore_dead_letters_replayed",
    "timerstore_dead_letters_purged",
]
GAUGES = [
    "timerstore_pending_timers",
    "timerstore_in_flight_timers",
    "timerstore_dead_letters",
    "timerstore_watermark_timestamp_seconds",
    "timerstore_topic_log_end_offset",
    "timerstore_delivery_queue_depth_timers",
    "timerstore_delivery_queue_capacity_timers",
    "timerstore_scan_cursor_lag_seconds",
]
SNAPSHOT_GAUGES = [
    "timerstore_pending_due_timers",
    "timerstore_oldest_pending_due_timestamp_seconds",
    "timerstore_stats_snapshot_timestamp_seconds",
]
HISTOGRAMS = [
    "timerstore_delivery_lateness_seconds",
    "timerstore_schedule_request_seconds",
    "timerstore_scan_batch_seconds",
    "timerstore_commit_batch_seconds",
    "timerstore_scan_batch_timers",
    "timerstore_commit_batch_timers",
]
ROCKS_GAUGES = [
    "timerstore_rocksdb_live_sst_bytes",
    "timerstore_rocksdb_pending_compaction_bytes",
    "timerstore_rocksdb_memtable_bytes",
    "timerstore_rocksdb_table_readers_bytes",
    "timerstore_rocksdb_block_cache_usage_bytes",
    "timerstore_rocksdb_block_cache_capacity_bytes",
]
ROCKS_COUNTERS = ["timerstore_rocksdb_write_stall_seconds"]
MALLOC_GAUGES = ["timerstore_malloc_bytes"]  # glibc's (tests/app/test_native_memory.py)


class Scrape:
    def __init__(self, text: str) -> None:
        self.families = {f.name: f for f in text_string_to_metric_families(text)}

    def type_of(self, name: str) -> str:
        assert name in self.families, f"{name} missing from /metrics"
        return str(self.families[name].type)

    def value(self, sample_name: str, **labels: str) -> float:
        for family in self.families.values():
            for sample in family.samples:
                if sample.name == sample_name and all(
                    sample.labels.get(k) == v for k, v in labels.items()
                ):
                    return float(sample.value)
        raise AssertionError(f"no sample {sample_name} {labels}")


def scrape(api: FakeApi, **headers: str) -> Scrape:
    r = api.client.get("/metrics", headers=headers)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain")
    return Scrape(r.text)


def _schedule(api: FakeApi, topic: str, timer_id: str, delay_ms: int) -> int:
    r = api.client.post("/v1/timers", json={"topic": topic, "id": timer_id, "delay_ms": delay_ms})
    assert r.status_code in (200, 201), r.text
    return r.status_code


class _FailingSink:
    name = "failing"

    def start(self) -> None:
        return None

    def stop(self) -> None:
        return None

    def deliver(self, batch: Sequence[DueTimer]) -> None:
        raise ConnectionError("broker down")


def _assert_types(s: Scrape, rocks: bool) -> None:
    for name in COUNTERS + (ROCKS_COUNTERS if rocks else []):
        assert s.type_of(name) == "counter", name
    for name in GAUGES + SNAPSHOT_GAUGES + MALLOC_GAUGES + (ROCKS_GAUGES if rocks else []):
        assert s.type_of(name) == "gauge", name
    for name in HISTOGRAMS:
        assert s.type_of(name) == "histogram", name
    assert s.type_of("timerstore_store_info") == "gauge"  # an info metric in the text format
    if not rocks:
        assert not [n for n in s.families if n.startswith("timerstore_rocksdb")]


@pytest.mark.parametrize("store", ["rocks", "wheel"])
def test_families_types_and_values_move(fake_api_factory: Callable[..., FakeApi], store) -> None:
    api = fake_api_factory(store=store)
    s0 = scrape(api)
    assert s0.value("timerstore_store_info", store=store) == 1
    assert s0.value("timerstore_timers_scheduled_total") == 0

    assert _schedule(api, "a", "1", 1000) == 201
    assert _schedule(api, "b", "1", 2000) == 201
    assert _schedule(api, "b", "2", 90_000) == 201
    assert _schedule(api, "b", "1", 3000) == 200  # a reschedule
    assert api.client.delete("/v1/timers/b/2").status_code == 204
    assert api.client.delete("/v1/timers/b/nope").status_code == 404
    api.service.engine.run_once(api.clock.now_ms())  # nothing due yet: the cursor catches up
    assert api.client.get("/v1/stats").status_code == 200  # a snapshot: buckets, oldest due
    s1 = scrape(api)
    assert s1.value("timerstore_timers_scheduled_total") == 4
    assert s1.value("timerstore_timers_rescheduled_total") == 1
    assert s1.value("timerstore_timers_cancelled_total", outcome="removed") == 1
    assert s1.value("timerstore_timers_cancelled_total", outcome="unknown") == 1
    assert s1.value("timerstore_pending_timers", topic="a") == 1
    assert s1.value("timerstore_pending_timers", topic="b") == 1
    assert s1.value("timerstore_schedule_request_seconds_count", kind="one") == 4
    assert s1.value("timerstore_pending_due_timers", due="lt_5s") == 2
    oldest_s = s1.value("timerstore_oldest_pending_due_timestamp_seconds")
    assert oldest_s == (api.clock.now_ms() + 1000) / 1000
    assert s1.value("timerstore_scan_cursor_lag_seconds") == 0

    api.clock.advance(4500)  # both due (the wheel's slots are 1 s); the cursor is 4.5 s behind
    assert scrape(api).value("timerstore_scan_cursor_lag_seconds") == 4.5
    assert api.deliver_due() == 2
    s2 = scrape(api)
    _assert_types(s2, rocks=store == "rocks")
    assert s2.value("timerstore_timers_delivered_total", topic="a", sink="log") == 1
    assert s2.value("timerstore_timers_delivered_total", topic="b", sink="log") == 1
    assert s2.value("timerstore_pending_timers", topic="b") == 0
    assert s2.value("timerstore_topic_log_end_offset", topic="b") == 1
    assert s2.value("timerstore_delivery_lateness_seconds_count") == 2
    assert s2.value("timerstore_delivery_lateness_seconds_sum") == 3.5 + 1.5
    assert s2.value("timerstore_delivery_lateness_seconds_bucket", le="1.0") == 0
    assert s2.value("timerstore_delivery_lateness_seconds_bucket", le="2.5") == 1
    assert s2.value("timerstore_delivery_lateness_seconds_bucket", le="5.0") == 2
    assert s2.value("timerstore_commit_batch_timers_sum") == 2
    assert s2.value("timerstore_scan_batch_timers_sum") == 2
    assert s2.value("timerstore_scan_cursor_lag_seconds") == 0
    heap = s2.families["timerstore_malloc_bytes"].samples
    assert {sample.labels["state"] for sample in heap} == {"in_use", "free"}
    assert s2.value("timerstore_malloc_bytes", state="in_use") > 0


@pytest.mark.parametrize("store", ["rocks", "wheel"])
def test_consumer_groups_show_committed_offset_and_lag(
    fake_api_factory: Callable[..., FakeApi], store
) -> None:
    api = fake_api_factory(store=store)
    for i in range(3):
        assert _schedule(api, "g", str(i), 0) == 201
    api.clock.advance(1000)
    assert api.deliver_due() == 3
    commit = api.client.post("/v1/topics/g/groups/billing/commit", json={"offset": 1})
    assert commit.status_code == 200, commit.text
    s = scrape(api)
    assert s.value("timerstore_group_committed_offset", topic="g", group="billing") == 1
    assert s.value("timerstore_group_lag_messages", topic="g", group="billing") == 2
    api.client.post("/v1/topics/g/groups/billing/commit", json={"offset": 3})
    assert scrape(api).value("timerstore_group_lag_messages", topic="g", group="billing") == 0


@pytest.mark.parametrize("store", ["rocks", "wheel"])
def test_dead_letters_replay_and_purge_move_their_counters(
    fake_api_factory: Callable[..., FakeApi], store
) -> None:
    api = fake_api_factory(store=store, sink=_FailingSink(), engine={"max_attempts": 2})
    for i in range(3):
        _schedule(api, "d", str(i), 0)
    api.clock.advance(1000)  # past the wheel's 1 s slot
    api.deliver_due()  # attempt 1 fails: retried later
    s = scrape(api)
    assert s.value("timerstore_delivery_failures_total", sink="failing") == 3
    assert s.value("timerstore_timers_dead_lettered_total") == 0
    api.clock.advance(10_000)
    api.deliver_due()  # attempt 2 fails: dead letters
    s = scrape(api)
    assert s.value("timerstore_delivery_failures_total", sink="failing") == 6
    assert s.value("timerstore_timers_dead_lettered_total") == 3
    assert s.value("timerstore_dead_letters") == 3
    assert api.client.post("/v1/deadletters/d/0/replay").status_code == 200
    r = api.client.delete("/v1/deadletters", params={"topic": "d"})
    assert r.status_code == 200 and r.json() == {"purged": 2}, r.text
    s = scrape(api)
    assert s.value("timerstore_dead_letters_replayed_total") == 1
    assert s.value("timerstore_dead_letters_purged_total") == 2
    assert s.value("timerstore_dead_letters") == 0
    assert s.value("timerstore_pending_timers", topic="d") == 1


def test_metrics_follow_the_api_key_rule_unless_public(fake_api_factory) -> None:
    closed = fake_api_factory(api_keys=["k1"])
    assert closed.client.get("/metrics").status_code == 401
    assert closed.client.get("/metrics", headers={"Authorization": "Bearer no"}).status_code == 401
    scrape(closed, Authorization="Bearer k1")
    public = fake_api_factory(api_keys=["k1"], metrics_public=True)
    scrape(public)
    assert public.client.get("/v1/stats").status_code == 401  # only /metrics is opened


def test_each_service_has_its_own_registry(fake_api_factory) -> None:
    one, two = fake_api_factory(), fake_api_factory()
    _schedule(one, "a", "1", 1000)
    assert scrape(one).value("timerstore_timers_scheduled_total") == 1
    assert scrape(two).value("timerstore_timers_scheduled_total") == 0


def test_bad_dead_letter_requests_are_4xx_naming_the_field(fake_api_factory) -> None:
    api = fake_api_factory(sink=_FailingSink(), engine={"max_attempts": 1})
    _schedule(api, "d", "1", 0)
    api.deliver_due()
    for method, path, params in (
        ("DELETE", "/v1/deadletters", {"topic": "bad topic"}),
        ("DELETE", "/v1/deadletters", {"topic": ""}),
        ("POST", "/v1/deadletters/bad%20topic/replay", {}),
        ("POST", "/v1/deadletters/" + "x" * 300 + "/replay", {}),
    ):
        r = api.client.request(method, path, params=params)
        assert r.status_code == 422, (path, params, r.text)
        assert r.json()["error"]["field"] == "topic", r.text
    assert api.client.post("/v1/deadletters/other/replay").json() == {"replayed": 0}
    assert api.client.delete("/v1/deadletters", params={"topic": "other"}).json() == {"purged": 0}
    assert scrape(api).value("timerstore_dead_letters") == 1  # nothing lost


def test_every_exposed_family_is_documented(fake_api_factory) -> None:
    """docs/operations.md names each family /metrics exposes (RocksDB tickers included)."""
    api = fake_api_factory(rocks={"statistics": True})
    _schedule(api, "a", "1", 0)
    api.deliver_due()
    assert api.client.get("/v1/stats").status_code == 200  # the snapshot families too
    exposed = set(scrape(api).families)
    assert len(exposed) > 30
    docs = (ROOT / "docs" / "operations.md").read_text()
    documented = set(re.findall(r"`(timerstore_[a-z_]+)`", docs))
    suffixes = ("", "_total", "_info")  # the parser names a counter's family without _total
    own = {f for f in exposed if not f.endswith("_created")}  # the library's, see the docs
    missing = {f for f in own if not any(f + s in documented for s in suffixes)}
    assert not missing, f"add to docs/operations.md: {sorted(missing)}"
