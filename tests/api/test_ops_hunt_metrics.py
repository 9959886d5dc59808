"""/metrics keeps a bounded number of series whatever names clients make up.

Topic and group names are client input. Every topic had series of its own in three
families (pending, log end, delivered) and every (topic, group) pair in two, so one
client could grow each scrape without bound: a commit of offset 0 under a made-up group
name (of a topic that need not exist) added two series that survive a restart; 50,000
topics made a scrape 5.5 MB and 0.8 s. Past ``MAX_TOPIC_SERIES`` topics and
``MAX_GROUP_SERIES`` pairs the rest are folded into one ``(other)`` series, and the sums
stay exact. Real RocksDB, the real app; the engine is driven with ``run_once``.

And the due-time buckets of a snapshot that reached ``housekeeping.stats_count_cap`` put
every timer past the cap in ``later`` ("more than a day away"), in /metrics, /v1/stats
and the dashboard's bars, when they could be due in a minute: they are ``uncounted`` now.
"""

from __future__ import annotations

from collections.abc import Callable

from app.telemetry import MAX_GROUP_SERIES, MAX_TOPIC_SERIES, OTHER
from tests.api.helpers import FakeApi
from tests.api.test_metrics import Scrape, scrape

TOPICS = MAX_TOPIC_SERIES + 500


def _samples(s: Scrape, name: str) -> dict[tuple[str, ...], float]:
    family = s.families[name.removesuffix("_total")]
    return {
        tuple(sorted(sample.labels.items())): sample.value
        for sample in family.samples
        if sample.name == name
    }


def _batch(api: FakeApi, topic_prefix: str, delay_ms: int) -> None:
    timers = [
        {"topic": f"{topic_prefix}{i:05d}", "id": "x", "delay_ms": delay_ms} for i in range(TOPICS)
    ]
    r = api.client.post("/v1/timers/batch", json={"timers": timers})
    assert r.status_code == 200, r.text


def test_topic_series_are_capped_and_the_rest_summed(
    fake_api_factory: Callable[..., FakeApi],
) -> None:
    api = fake_api_factory()
    _batch(api, "due-", 1)
    api.clock.advance(10)
    assert api.deliver_due() == TOPICS
    _batch(api, "wait-", 60_000)

    s = scrape(api)
    pending = _samples(s, "timerstore_pending_timers")
    log_end = _samples(s, "timerstore_topic_log_end_offset")
    delivered = _samples(s, "timerstore_timers_delivered_total")
    for series in (pending, log_end, delivered):
        assert len(series) == MAX_TOPIC_SERIES + 1, len(series)
        assert any(dict(labels)["topic"] == OTHER for labels in series)
    assert sum(pending.values()) == TOPICS == api.stats()["pending"]
    assert sum(log_end.values()) == TOPICS
    assert sum(delivered.values()) == TOPICS == api.stats()["delivered"]

    # a topic that already has its delivered series keeps it; a new one is counted in OTHER
    labelled = next(dict(k)["topic"] for k in delivered if dict(k)["topic"] != OTHER)
    unlabelled = "zz-new-topic"
    for topic in (labelled, unlabelled):
        r = api.client.post("/v1/timers", json={"topic": topic, "id": "y", "delay_ms": 1})
        assert r.status_code == 201, r.text
    api.clock.advance(10)
    assert api.deliver_due() == 2
    after = _samples(scrape(api), "timerstore_timers_delivered_total")
    assert len(after) == MAX_TOPIC_SERIES + 1
    assert after[(("sink", "log"), ("topic", labelled))] == 2
    other = (("sink", "log"), ("topic", OTHER))
    assert after[other] == delivered[other] + 1


def test_group_series_are_capped_and_the_rest_lag_summed(
    fake_api_factory: Callable[..., FakeApi],
) -> None:
    api = fake_api_factory()
    r = api.client.post("/v1/timers", json={"topic": "t", "id": "a", "delay_ms": 1})
    assert r.status_code == 201, r.text
    api.clock.advance(10)
    assert api.deliver_due() == 1
    groups = MAX_GROUP_SERIES + 100
    for i in range(groups):  # made-up names, offset 0: each one lags by the whole log
        r = api.client.post(f"/v1/topics/t/groups/g{i:05d}/commit", json={"offset": 0})
        assert r.status_code == 200, r.text

    s = scrape(api)
    committed = _samples(s, "timerstore_group_committed_offset")
    lag = _samples(s, "timerstore_group_lag_messages")
    assert len(committed) == MAX_GROUP_SERIES
    assert len(lag) == MAX_GROUP_SERIES + 1
    assert lag[(("group", OTHER), ("topic", OTHER))] == 100
    assert sum(lag.values()) == groups  # one message, not read by any group


def test_timers_past_the_count_cap_are_uncounted_not_later(
    fake_api_factory: Callable[..., FakeApi],
) -> None:
    api = fake_api_factory(housekeeping={"stats_count_cap": 10})
    timers = [{"topic": "a", "id": f"i{i:02d}", "delay_ms": 30_000} for i in range(25)]
    assert api.client.post("/v1/timers/batch", json={"timers": timers}).status_code == 200
    buckets = api.stats()["due_buckets"]  # the snapshot /metrics reads
    assert buckets["capped"] is True
    assert buckets["later"] == 0  # was 15: "more than a day away"
    assert (buckets["lt_1m"], buckets["later"], buckets["uncounted"]) == (10, 0, 15)
    due = {
        dict(k)["due"]: v for k, v in _samples(scrape(api), "timerstore_pending_due_timers").items()
    }
    assert (due["lt_1m"], due["later"], due["uncounted"]) == (10, 0, 15)
    assert sum(due.values()) == 25


def test_below_the_cap_later_is_counted_and_nothing_is_uncounted(
    fake_api_factory: Callable[..., FakeApi],
) -> None:
    api = fake_api_factory(housekeeping={"stats_count_cap": 10})
    for i, delay_ms in enumerate([30_000, 3 * 86_400_000]):
        r = api.client.post("/v1/timers", json={"topic": "a", "id": f"t{i}", "delay_ms": delay_ms})
        assert r.status_code == 201, r.text
    buckets = api.stats()["due_buckets"]
    assert (buckets["capped"], buckets["lt_1m"], buckets["later"], buckets["uncounted"]) == (
        False,
        1,
        1,
        0,
    )
