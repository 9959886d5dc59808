"""The service's Prometheus metrics: the one owner of every counter and histogram.

The engine (scanner, dispatcher) and the service feed a ``Telemetry``; the API only
renders it (``render``). Each ``Telemetry`` has its own ``CollectorRegistry``, never the
library's global one, so several services (tests, benchmarks) live in one process.

Gauges that describe the store (pending, in flight, watermark, RocksDB properties) are
read at scrape time by ``app.telemetry_gauges.ServiceGauges`` from values the store and
engine already keep in memory: a scrape never iterates the store. Counters count since
the process started (Prometheus handles the reset at a restart); the store's own exact
totals stay in ``/v1/stats``.

The hot path observes whole batches: lateness goes into a ``BatchHistogram`` (one sort
and a bisect per bucket bound per batch) instead of one ``observe`` call per timer.
"""

from __future__ import annotations

import bisect
import threading
from collections import Counter as Tally
from collections.abc import Iterable, Iterator, Sequence

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import HistogramMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from storage.protocol import DueTimer

PREFIX = "timerstore"
CONTENT_TYPE = CONTENT_TYPE_LATEST
# Topic and group names are client input: a series per name let one client grow every
# scrape without bound (a commit of offset 0 per made-up group name added two durable
# series each; 50,000 topics made a scrape 5.5 MB and 0.8 s). Past these many names a
# family folds the rest into one series labelled OTHER, which no topic or group can be
# called (names are A-Z a-z 0-9 . _ : -); /v1/topics still lists each of them.
MAX_TOPIC_SERIES = 1000  # topics with a series of their own, per family
MAX_GROUP_SERIES = 1000  # (topic, group) pairs with a series of their own
OTHER = "(other)"
# lateness (delivered - due): 1 ms to 60 s
LATENESS_BUCKETS_S = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)
DURATION_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
BATCH_SIZE_BUCKETS = (1, 10, 100, 500, 1000, 5000, 10_000, 50_000, 100_000)


class BatchHistogram(Collector):
    """A histogram fed a batch at a time (milliseconds in, seconds out)."""

    def __init__(self, name: str, documentation: str, bounds_s: Sequence[float]) -> None:
        self.name, self.documentation = name, documentation
        self._bounds_ms = [b * 1000 for b in bounds_s]
        self._bounds_s = list(bounds_s)
        self._counts = [0] * (len(bounds_s) + 1)  # per bucket, the last is +Inf
        self._sum_ms = 0
        self._lock = threading.Lock()

    def observe_ms(self, values_ms: Iterable[int]) -> None:
        values = sorted(values_ms)
        if not values:
            return
        cumulative = [bisect.bisect_right(values, bound) for bound in self._bounds_ms]
        with self._lock:
            previous = 0
            for i, below in enumerate(cumulative):
                self._counts[i] += below - previous
                previous = below
            self._counts[-1] += len(values) - previous
            self._sum_ms += sum(values)

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            counts, total_ms = list(self._counts), self._sum_ms
        buckets: list[tuple[str, float]] = []
        running = 0
        for bound, count in zip([*self._bounds_s, float("inf")], counts, strict=True):
            running += count
            buckets.append((floatToGoString(bound), running))
        family = HistogramMetricFamily(self.name, self.documentation, unit="")
        family.add_metric([], buckets, total_ms / 1000)
        yield family


class Telemetry:
    """Counters and histograms of one service; ``registry`` is what ``/metrics`` renders."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r, p = self.registry, PREFIX
        self.scheduled_total = Counter(
            f"{p}_timers_scheduled", "Timers stored (new or rescheduled)", registry=r
        )
        self.rescheduled = Counter(
            f"{p}_timers_rescheduled", "Pending timers replaced by a new schedule", registry=r
        )
        self.cancelled = Counter(
            f"{p}_timers_cancelled", "Cancel requests by outcome", ["outcome"], registry=r
        )
        self.delivered = Counter(
            f"{p}_timers_delivered", "Timers delivered", ["topic", "sink"], registry=r
        )
        self.failed = Counter(
            f"{p}_delivery_failures",
            "Delivery attempts that failed (timers), by sink",
            ["sink"],
            registry=r,
        )
        self.dead_lettered = Counter(
            f"{p}_timers_dead_lettered", "Timers moved to the dead letters", registry=r
        )
        self.replayed = Counter(f"{p}_dead_letters_replayed", "Dead letters replayed", registry=r)
        self.purged = Counter(f"{p}_dead_letters_purged", "Dead letters purged", registry=r)
        self._delivered_topics: set[str] = set()  # the topics labelled so far (capped)
        self._delivered_lock = threading.Lock()
        self._histograms(r)

    def _histograms(self, r: CollectorRegistry) -> None:
        p = PREFIX
        self.lateness = BatchHistogram(
            f"{p}_delivery_lateness_seconds",
            "Delivered time minus due time of each delivered timer",
            LATENESS_BUCKETS_S,
        )
        r.register(self.lateness)
        self.schedule_latency = Histogram(
            f"{p}_schedule_request_seconds",
            "Time to validate and store one schedule request (single or batch)",
            ["kind"],
            buckets=DURATION_BUCKETS_S,
            registry=r,
        )
        # the children of the two kinds, looked up once: ``labels()`` costs about as much
        # as the observation, once per single schedule
        self._schedule_latency_of = {k: self.schedule_latency.labels(k) for k in ("one", "batch")}
        self.scan_seconds = Histogram(
            f"{p}_scan_batch_seconds",
            "Duration of one due scan (one store.due call)",
            buckets=DURATION_BUCKETS_S,
            registry=r,
        )
        self.commit_seconds = Histogram(
            f"{p}_commit_batch_seconds",
            "Duration of one delivery: sink plus the store commit",
            buckets=DURATION_BUCKETS_S,
            registry=r,
        )
        self.send_seconds = Histogram(
            f"{p}_sink_send_seconds",
            "Duration of one send to an external sink (a webhook POST, a Redis pipeline)",
            ["sink", "outcome"],
            buckets=DURATION_BUCKETS_S,
            registry=r,
        )
        self.scan_sizes = Histogram(
            f"{p}_scan_batch_timers", "Timers per due scan", buckets=BATCH_SIZE_BUCKETS, registry=r
        )
        self.commit_sizes = Histogram(
            f"{p}_commit_batch_timers",
            "Timers per delivered batch",
            buckets=BATCH_SIZE_BUCKETS,
            registry=r,
        )

    # ----------------------------------------------------------------- fed by the engine
    def scanned(self, seconds: float, count: int) -> None:
        self.scan_seconds.observe(seconds)
        self.scan_sizes.observe(count)

    def committed(
        self, batch: Sequence[DueTimer], sink: str, seconds: float, lateness_ms: list[int]
    ) -> None:
        self.commit_seconds.observe(seconds)
        self.commit_sizes.observe(len(batch))
        for topic, n in Tally(t.topic for t in batch).items():
            self.delivered.labels(self._delivered_label(topic), sink).inc(n)
        self.lateness.observe_ms(lateness_ms)

    def _delivered_label(self, topic: str) -> str:
        """The topic's own label for the first ``MAX_TOPIC_SERIES`` topics delivered (a
        counter's series must go on once it exists), ``OTHER`` for every later one."""
        with self._delivered_lock:
            if topic in self._delivered_topics:
                return topic
            if len(self._delivered_topics) < MAX_TOPIC_SERIES:
                self._delivered_topics.add(topic)
                return topic
        return OTHER

    def sent(self, sink: str, ok: bool, seconds: float) -> None:
        self.send_seconds.labels(sink, "ok" if ok else "failed").observe(seconds)

    def delivery_failed(self, sink: str, timers: int, dead_lettered: int) -> None:
        self.failed.labels(sink).inc(timers)
        if dead_lettered:
            self.dead_lettered.inc(dead_lettered)

    # ----------------------------------------------------------------- fed by the service
    def scheduled(self, stored: int, replaced: int, kind: str, seconds: float) -> None:
        """One schedule request: ``stored`` timers, ``replaced`` of them rescheduled."""
        self.scheduled_total.inc(stored)
        if replaced:
            self.rescheduled.inc(replaced)
        self._schedule_latency_of[kind].observe(seconds)

    def ingested(self, added: int, replaced: int) -> None:
        """A bulk ingest stores timers too: counted like schedules (replaced = rescheduled)."""
        self.scheduled_total.inc(added + replaced)
        if replaced:
            self.rescheduled.inc(replaced)

    def render(self) -> bytes:
        """The text exposition of every metric (runs the scrape-time collectors)."""
        return generate_latest(self.registry)
