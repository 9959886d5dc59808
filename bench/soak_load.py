"""The soak's load (``bench.soak``): producer, mutator, reader and consumers, each a thread
with its own client, and the webhook receiver. Every answer goes to ``bench.soak_model``."""

from __future__ import annotations

import collections
import hashlib
import hmac
import json
import random
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from bench.measure import now_ms
from bench.soak_model import Delivery, Key, Model
from client import Conflict, NotFound, TimerSpec, TimerStoreClient, TimerStoreClientError

LOG_TOPICS = ("soak-a", "soak-b", "soak-c")
HOOK_TOPIC = "soak-hook"
HOOK_SHARE = 0.02  # of the scheduled timers: the receiver is a thread-per-request server
GROUP = "soak"


class Load:
    """The threads that drive the service; ``stop_producing`` ends the writes, ``stop`` the
    reads (the consumers run until every timer was seen).

    With ``crashes`` the service is killed now and then (``bench.soak``): a request that
    gets no answer is then cut off (its timers uncertain), and the thread waits for
    ``up`` before it goes on. Without, a request with no answer is a broken promise.
    """

    def __init__(
        self,
        url: str,
        model: Model,
        rate: int,
        batch: int,
        max_delay_ms: int,
        seed: int,
        crashes: bool = False,
    ) -> None:
        self.url, self.model, self.crashes = url, model, crashes
        self.rate, self.batch, self.max_delay_ms = rate, batch, max_delay_ms
        self.rng = random.Random(seed)  # the producer's; the others seed their own from it
        self.recent: collections.deque[Key] = collections.deque(maxlen=max(100, rate))
        self.recent_lock = threading.Lock()
        self.not_found: list[Key] = []  # a GET's 404: must have been cancelled
        self.producing, self.reading = threading.Event(), threading.Event()
        self.up = threading.Event()  # the service is running (cleared around a crash)
        self.up.set()
        self.threads = [
            threading.Thread(target=self._guard(self.produce), name="soak-producer", daemon=True),
            threading.Thread(target=self._guard(self.mutate), name="soak-mutator", daemon=True),
            threading.Thread(target=self._guard(self.read), name="soak-reader", daemon=True),
        ]
        self.consumers = [
            threading.Thread(
                target=self._guard(self.consume, topic), name=f"soak-{topic}", daemon=True
            )
            for topic in LOG_TOPICS
        ]

    def start(self) -> None:
        self.producing.set()
        self.reading.set()
        for thread in self.threads + self.consumers:
            thread.start()

    def stop_producing(self) -> None:
        self.producing.clear()
        for thread in self.threads:
            thread.join(60)

    def stop(self) -> None:
        self.reading.clear()
        for thread in self.consumers:
            thread.join(60)

    def halt(self) -> None:
        """Every thread ends at its next turn (also those waiting for a restart)."""
        self.producing.clear()
        self.reading.clear()
        self.up.set()
        for thread in self.threads + self.consumers:
            if thread.is_alive():
                thread.join(60)

    def _guard(self, work: Callable[..., None], *args: Any) -> Callable[[], None]:
        """A worker thread's top: what escapes is a broken promise (no answer, a 5xx)."""

        def run() -> None:
            try:
                work(*args)
            except (httpx.HTTPError, TimerStoreClientError) as exc:
                self.model.unanswered(f"{work.__name__}: {type(exc).__name__}: {exc}")

        return run

    def _cut_off(self, exc: httpx.TransportError, requested: dict[Key, int]) -> None:
        """A request the service did not answer: a broken promise, unless a crash was
        meant; then its timers are uncertain and the thread waits for the restart."""
        if not self.crashes:
            raise exc
        self.model.cut_off(requested)
        self.up.wait(120)

    def _spec(self, topic: str, timer_id: str, at_ms: int) -> TimerSpec:
        size = self.rng.randrange(20, 400)
        headers = {"n": timer_id} if self.rng.random() < 0.2 else None
        return TimerSpec(topic=topic, id=timer_id, deliver_at_ms=at_ms, payload="p" * size,
                         headers=headers)  # fmt: skip

    def _due_ms(self, rng: random.Random) -> int:
        return now_ms() + rng.randrange(-500, self.max_delay_ms)  # some past due

    def produce(self) -> None:
        interval_s = self.batch / self.rate
        next_s = time.monotonic()
        with TimerStoreClient(self.url) as client:
            for turn in range(10**12):
                if not self.producing.is_set():
                    return
                self._produce_one(client, turn)
                next_s = max(next_s + interval_s, time.monotonic() - 1)  # no catch-up rush
                time.sleep(max(0.0, next_s - time.monotonic()))  # pacing to --rate

    def _produce_one(self, client: TimerStoreClient, turn: int) -> None:
        """A batch POST, then a single POST."""
        specs = [self._spec(self._topic(), f"b{turn}-{j}", self._due_ms(self.rng))
                 for j in range(self.batch - 1)]  # fmt: skip
        one = self._spec(self._topic(), f"s{turn}", self._due_ms(self.rng))
        for sent in (specs, [one]):
            try:
                if len(sent) > 1:
                    client.schedule_many(sent)
                else:
                    client.schedule(one.topic, id=one.id, deliver_at_ms=one.deliver_at_ms,
                                    payload=one.payload, headers=one.headers)  # fmt: skip
            except httpx.TransportError as exc:
                self._cut_off(exc, {(s.topic, s.id): s.deliver_at_ms or 0 for s in sent if s.id})
                return
            self._acknowledged(sent)

    def _topic(self) -> str:
        return HOOK_TOPIC if self.rng.random() < HOOK_SHARE else self.rng.choice(LOG_TOPICS)

    def _acknowledged(self, specs: list[TimerSpec]) -> None:
        for spec in specs:
            assert spec.id is not None and spec.deliver_at_ms is not None
            self.model.scheduled((spec.topic, spec.id), spec.deliver_at_ms)
        with self.recent_lock:
            self.recent.extend((s.topic, s.id) for s in specs if s.id is not None)

    def _pick(self, rng: random.Random) -> Key | None:
        with self.recent_lock:
            return rng.choice(self.recent) if self.recent else None

    def mutate(self) -> None:
        """Reschedule or cancel a recent timer, about 100 times a second; a cancelled
        timer leaves the pool (the model says it must never arrive)."""
        rng = random.Random(self.rng.random())
        with TimerStoreClient(self.url) as client:
            while self.producing.is_set():
                key = self._pick(rng)
                if key is not None:
                    self._mutate_one(client, rng, key)
                time.sleep(0.01)

    def _mutate_one(self, client: TimerStoreClient, rng: random.Random, key: Key) -> None:
        if rng.random() < 0.5:
            with self.recent_lock:  # never rescheduled again: a cancel is final here
                if key in self.recent:
                    self.recent.remove(key)
            try:
                outcome = client.cancel(*key).outcome.value
            except httpx.TransportError as exc:
                self.model.count("cancel_cut_off")
                return self._cut_off(exc, {key: 0})
            return self.model.cancelled(key, outcome)
        at_ms = self._due_ms(rng)
        try:
            client.schedule(key[0], id=key[1], deliver_at_ms=at_ms, payload="again")
        except Conflict:  # in flight or delivered: the first time stands
            return self.model.count("reschedule_409")
        except httpx.TransportError as exc:
            return self._cut_off(exc, {key: at_ms})
        self.model.rescheduled(key, at_ms)

    def read(self) -> None:
        """Inspect a recent timer about 50 times a second; a 404 is checked at the end."""
        rng = random.Random(self.rng.random())
        with TimerStoreClient(self.url) as client:
            while self.producing.is_set():
                key = self._pick(rng)
                if key is not None:
                    try:
                        self.model.count(f"get_{client.get(*key).state}")
                    except NotFound:
                        self.not_found.append(key)
                    except httpx.TransportError as exc:
                        self._cut_off(exc, {})
                time.sleep(0.02)

    def consume(self, topic: str) -> None:
        with TimerStoreClient(self.url) as client:
            while self.reading.is_set():
                try:
                    page = client.consume(topic, group=GROUP, limit=1000, wait_ms=500)
                    seen = now_ms()
                    for m in page.messages:
                        delivery = Delivery(m.deliver_at_ms, m.delivered_at_ms, seen, m.offset)
                        self.model.logged_message((topic, m.id), delivery)
                    if page.messages:
                        client.commit(topic, GROUP, page.next_offset)
                except httpx.TransportError as exc:  # read again from the committed offset
                    self._cut_off(exc, {})


def start_receiver(
    secret: str, fail_share: float, seed: int, model: Model
) -> tuple[ThreadingHTTPServer, str, threading.Thread]:
    """A webhook receiver on loopback: checks the signature, refuses ``fail_share`` of the
    requests with a 503, and reports every accepted delivery to ``model``."""
    rng, lock = random.Random(seed), threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers["Content-Length"])
            body = self.rfile.read(length)
            seen = now_ms()
            if len(body) < length:  # the sender died mid-request: no answer, no delivery
                model.count("webhook_cut_short")
                self.close_connection = True
                return
            if not _signed(secret, self.headers.get("Timerstore-Signature", ""), body):
                model.unanswered(f"webhook with a bad signature: {body[:100]!r}")
            with lock:
                refuse = rng.random() < fail_share
            if not refuse:
                sent = json.loads(body)
                at_ms, attempt = sent["deliver_at_ms"], sent["attempt"]
                delivery = Delivery(at_ms, sent["delivered_at_ms"], seen, attempt=attempt)
                model.hooked_message((sent["topic"], sent["id"]), delivery)
            self.send_response(503 if refuse else 204)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return None

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request: Any, client_address: Any) -> None:
            """A killed service resets its connections (``--kill-every``); anything
            else the handler raised is a defect of the soak, reported as one."""
            exc = sys.exc_info()[1]
            if not isinstance(exc, ConnectionError):
                model.unanswered(f"the webhook receiver failed: {exc!r}")

    server = Server(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, name="soak-receiver", daemon=True)
    thread.start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/hook", thread


def _signed(secret: str, header: str, body: bytes) -> bool:
    fields = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    if "t" not in fields or "v1" not in fields:
        return False
    mac = hmac.new(secret.encode(), fields["t"].encode() + b"." + body, hashlib.sha256)
    return hmac.compare_digest(mac.hexdigest(), fields["v1"])
