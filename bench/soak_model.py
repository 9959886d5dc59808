"""What the soak expects of the service, and the checks of what it saw (``bench.soak``).

The model hears every answer the service gave the load (a schedule acknowledged, a
reschedule refused, a cancel's outcome) and every delivery the consumers and the webhook
receiver saw, and says at the end what broke the service's promises:

- an acknowledged timer never delivered, or delivered twice into the embedded log;
- a delivery before its time, or at a time other than the last acknowledged one;
- a cancelled timer (outcome ``cancelled``) delivered at all;
- a webhook timer whose every attempt was refused (it must arrive at least once);
- any 5xx, or a request the service did not answer (but for those a deliberate crash
  cut off).

A request a crash cut off leaves its timers uncertain: they are left out of the
"delivered once" rule but may still not be delivered twice into the log, or early. A
message read twice at one offset (a consumer group's commit lost to a crash) is one
delivery.
"""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass, field
from typing import Any

Key = tuple[str, str]  # (topic, id)


@dataclass
class Delivery:
    deliver_at_ms: int
    delivered_at_ms: int
    seen_ms: int  # our clock when the consumer or the receiver saw it
    offset: int = -1  # the log offset (a consumer that restarts may read one again)
    attempt: int = 0  # the webhook's attempt number


@dataclass
class Expectation:
    deliver_at_ms: int  # the last acknowledged time
    cancelled: bool = False  # a cancel answered "cancelled": it must never arrive
    uncertain: bool = False  # a crash cut off a request about it


@dataclass
class Model:
    """Thread-safe: every worker thread reports here."""

    webhook_topics: frozenset[str]
    lock: threading.Lock = field(default_factory=threading.Lock)
    expected: dict[Key, Expectation] = field(default_factory=dict)
    logged: dict[Key, list[Delivery]] = field(default_factory=lambda: collections.defaultdict(list))
    hooked: dict[Key, list[Delivery]] = field(default_factory=lambda: collections.defaultdict(list))
    errors: list[str] = field(default_factory=list)  # 5xx and unanswered requests
    counts: collections.Counter[str] = field(default_factory=collections.Counter)

    def scheduled(self, key: Key, deliver_at_ms: int) -> None:
        with self.lock:
            self.expected[key] = Expectation(deliver_at_ms)
            self.counts["scheduled"] += 1

    def rescheduled(self, key: Key, deliver_at_ms: int) -> None:
        with self.lock:
            self.expected[key].deliver_at_ms = deliver_at_ms
            self.counts["rescheduled"] += 1

    def count(self, what: str) -> None:
        with self.lock:
            self.counts[what] += 1

    def cancelled(self, key: Key, outcome: str) -> None:
        with self.lock:
            self.counts[f"cancel_{outcome}"] += 1
            if outcome == "cancelled":
                self.expected[key].cancelled = True
            elif outcome == "unknown":  # we scheduled it and it is not yet expired
                self.errors.append(f"cancel of {key} answered unknown")

    def unanswered(self, what: str) -> None:
        with self.lock:
            self.errors.append(what)

    def cut_off(self, requested: dict[Key, int]) -> None:
        """Requests a deliberate crash left unanswered (``--kill-every``): their timers
        (``requested``: key -> the time asked for) may or may not be stored."""
        with self.lock:
            self.counts["cut_off_by_a_crash"] += 1
            for key, at_ms in requested.items():
                exp = self.expected.setdefault(key, Expectation(at_ms))
                exp.uncertain = True

    def logged_message(self, key: Key, delivery: Delivery) -> None:
        with self.lock:
            self.logged[key].append(delivery)

    def hooked_message(self, key: Key, delivery: Delivery) -> None:
        with self.lock:
            self.hooked[key].append(delivery)

    def outstanding(self) -> int:
        """Acknowledged timers, not cancelled, that nobody has seen delivered yet."""
        with self.lock:
            return sum(
                1
                for key, exp in self.expected.items()
                if not exp.cancelled and not exp.uncertain and not self._seen(key)
            )

    def not_cancelled(self, keys: list[Key]) -> list[str]:
        """Of timers a GET did not find, those no cancel removed (nor may have: a cancel
        a kill cut off)."""
        with self.lock:
            found = [(k, self.expected[k]) for k in keys]
            return [
                f"GET {k}: 404, never cancelled"
                for k, e in found
                if not (e.cancelled or e.uncertain)
            ]

    def _seen(self, key: Key) -> bool:
        return bool(self.logged.get(key) or self.hooked.get(key))

    def check(self) -> dict[str, Any]:
        """Every broken promise (at most 20 of each kind) and the counts behind them."""
        with self.lock:
            broken: dict[str, list[str]] = collections.defaultdict(list)
            for key, exp in self.expected.items():
                self._check_one(key, exp, broken)
            for key in set(self.logged) | set(self.hooked):
                if key not in self.expected:
                    broken["delivered but never acknowledged"].append(repr(key))
            if self.errors:
                broken["5xx or no answer"] = list(self.errors)
            return {
                "violations": {k: v[:20] for k, v in broken.items()},
                "violation_count": sum(len(v) for v in broken.values()),
                **self._figures(),
            }

    def _figures(self) -> dict[str, Any]:
        expected = self.expected.values()
        offsets = [len({d.offset for d in ds}) for ds in self.logged.values()]
        return {
            "expected_deliveries": sum(1 for e in expected if not (e.cancelled or e.uncertain)),
            "uncertain": sum(1 for e in expected if e.uncertain),
            "log_deliveries": sum(offsets),  # one per offset
            "log_read_again": sum(map(len, self.logged.values())) - sum(offsets),
            "webhook_deliveries": sum(map(len, self.hooked.values())),
            "webhook_duplicates": sum(len(d) - 1 for d in self.hooked.values() if len(d) > 1),
            "webhook_duplicate_examples": [
                [k, [(d.attempt, d.delivered_at_ms, d.seen_ms) for d in ds]]
                for k, ds in list(self.hooked.items())
                if len(ds) > 1
            ][:10],
            "counts": dict(self.counts),
        }

    def _check_one(self, key: Key, exp: Expectation, broken: dict[str, list[str]]) -> None:
        webhook = key[0] in self.webhook_topics
        seen = (self.hooked if webhook else self.logged).get(key, [])
        if exp.cancelled and seen:
            broken["cancelled, then delivered"].append(repr(key))
        elif not seen and not exp.cancelled and not exp.uncertain:
            broken["acknowledged, never delivered"].append(repr(key))
        offsets = {d.offset for d in seen}
        if len(offsets) > 1 and not webhook:
            broken["delivered twice into the log"].append(f"{key}: offsets {sorted(offsets)}")
        for d in seen:
            if d.delivered_at_ms < d.deliver_at_ms or d.seen_ms < d.deliver_at_ms:
                broken["delivered early"].append(f"{key}: {d}")
            if not exp.uncertain and d.deliver_at_ms != exp.deliver_at_ms:
                broken["delivered at a time not the last acknowledged"].append(
                    f"{key}: {d.deliver_at_ms} != {exp.deliver_at_ms}"
                )
