"""The RocksDB store's fixes from review, on a real RocksDB: the dead-letter count,
replay's conflict states, bad manifests and out-of-range times (races:
``test_rocks_races``)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from storage.errors import ConflictError, InvalidInputError
from storage.protocol import LOG_SINK, NewTimer, TimerState
from storage.rocks import RocksTimerStore
from storage.rocks import keys as layout
from storage.rocks.ingest import MANIFEST
from tests.pipeline.helpers import LIMITS, NOW, row, stage


def nt(timer_id: str, deliver_ms: int, topic: str = "t") -> NewTimer:
    return NewTimer(topic, timer_id, deliver_ms, b"p")


# ------------------------------------------------------------- dead letters


def _dead_letter_once(store: RocksTimerStore, timer_id: str, at_ms: int) -> None:
    store.schedule([nt(timer_id, at_ms)], at_ms - 1)
    store.dead_letter(store.due(at_ms, 10), at_ms, "boom")


def test_dead_lettered_counts_entries_when_an_identity_is_dead_lettered_again(rocks_store):
    _dead_letter_once(rocks_store, "x", NOW + 1000)
    _dead_letter_once(rocks_store, "x", NOW + 3000)  # scheduled again, fails again
    assert rocks_store.stats().dead_lettered == 1
    assert len(rocks_store.dead_letters().timers) == 1
    assert rocks_store.get("t", "x").deliver_at_ms == NOW + 3000  # the second replaced it
    assert rocks_store.purge_dead_letters() == 1
    assert rocks_store.stats().dead_lettered == 0
    rocks_store.close()
    again = RocksTimerStore(rocks_store.settings)
    try:
        assert again.stats().dead_lettered == 0  # the persisted counter too
    finally:
        again.close()


def test_a_timer_given_twice_to_dead_letter_counts_once(rocks_store):
    rocks_store.schedule([nt("x", NOW)], NOW)
    [timer] = rocks_store.due(NOW, 10)
    rocks_store.dead_letter([timer, timer], NOW, "boom")
    stats = rocks_store.stats()
    assert (stats.dead_lettered, stats.pending) == (1, 0)
    assert len(rocks_store.dead_letters().timers) == 1


def test_replay_refuses_with_the_state_cancel_reports(rocks_store):
    """A dead-lettered identity scheduled again may be pending, in flight or delivered;
    delivered by a range page (format 3), its ids value still looks pending."""
    names = ("delivered", "in-flight", "pending")
    rocks_store.schedule([nt(n, NOW + 1000) for n in names], NOW)
    rocks_store.dead_letter(rocks_store.due(NOW + 1000, 10), NOW + 1000, "boom")
    rocks_store.schedule([nt("delivered", NOW + 3000)], NOW + 2000)
    rocks_store.commit_delivered(rocks_store.due(NOW + 3000, 10), NOW + 3000, sink=LOG_SINK)
    rocks_store.schedule([nt("in-flight", NOW + 5000), nt("pending", NOW + 5000)], NOW + 4000)
    rocks_store.release([t for t in rocks_store.due(NOW + 5000, 10) if t.id == "pending"])
    ids = rocks_store.handles.cfs["ids"]
    assert len(ids.get(layout.ident_key(b"t", b"delivered"))) == 8  # by a range page
    for timer_id, state in (
        ("delivered", TimerState.DELIVERED),
        ("in-flight", TimerState.IN_FLIGHT),
        ("pending", TimerState.PENDING),
    ):
        with pytest.raises(ConflictError) as caught:
            rocks_store.replay_dead_letter("t", timer_id, NOW + 5000)
        assert caught.value.state == state, timer_id
    assert [r.state for r in rocks_store.cancel([("t", "delivered"), ("t", "in-flight")])] == [
        TimerState.DELIVERED,
        TimerState.IN_FLIGHT,
    ]
    assert rocks_store.stats().dead_lettered == 3  # nothing replayed


# ------------------------------------------------------------- bad manifests


@pytest.fixture
def staged(tmp_path) -> Path:
    stage_dir = tmp_path / "stage"
    stage_dir.mkdir()
    stage(stage_dir, [row("t", f"i{n}", NOW + n) for n in range(10)])
    return stage_dir


def _edit_manifest(stage_dir: Path, edit: Callable[[dict], None]) -> None:
    path = stage_dir / MANIFEST
    manifest = json.loads(path.read_text())
    edit(manifest)
    path.write_text(json.dumps(manifest))


def _refused(store: RocksTimerStore, stage_dir: Path, *words: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        store.ingest_staged(str(stage_dir), limits=LIMITS)
    assert caught.value.field == "stage_dir"
    for word in words:
        assert word in caught.value.message
    assert store.stats().pending == 0 and store.list_pending().timers == []


def test_ingest_refuses_a_manifest_that_is_not_json(rocks_store, staged):
    (staged / MANIFEST).write_bytes(b"{not json")
    _refused(rocks_store, staged, MANIFEST, "malformed")


@pytest.mark.parametrize("field", ["first_key", "last_key"])
def test_ingest_refuses_a_key_that_is_not_hex_naming_it(rocks_store, staged, field):
    def edit(manifest: dict) -> None:
        manifest["files"][1][field] = "zz"

    _edit_manifest(staged, edit)
    _refused(rocks_store, staged, f"files[1].{field}", "hexadecimal")


def test_ingest_refuses_a_staged_file_outside_the_staged_directory(rocks_store, staged):
    elsewhere = staged.parent / "elsewhere"
    elsewhere.mkdir()

    def edit(manifest: dict) -> None:
        name = os.path.basename(manifest["files"][0]["path"])
        os.replace(staged / manifest["files"][0]["path"], elsewhere / name)  # exists, outside
        manifest["files"][0]["path"] = f"../elsewhere/{name}"

    _edit_manifest(staged, edit)
    _refused(rocks_store, staged, "files[0].path", "outside")


def test_ingest_refuses_an_absolute_path_outside_and_takes_one_inside(rocks_store, staged):
    inside = (staged / MANIFEST).read_text()
    _edit_manifest(staged, lambda m: m["files"][0].update(path="/etc/hostname"))
    _refused(rocks_store, staged, "files[0].path", "outside")

    (staged / MANIFEST).write_text(inside)

    def edit(manifest: dict) -> None:
        manifest["files"][0]["path"] = str(staged / manifest["files"][0]["path"])

    _edit_manifest(staged, edit)  # absolute, naming the stage's own file
    assert rocks_store.ingest_staged(str(staged), limits=LIMITS).added == 10


@pytest.mark.parametrize("content", [b"", b"not an sst file, but long enough to hold a footer" * 2])
def test_ingest_refuses_a_staged_file_that_is_not_an_sst(rocks_store, staged, content):
    """The binding raises a bare Exception for such a file (a 500 through the API)."""
    manifest = json.loads((staged / MANIFEST).read_text())
    (staged / manifest["files"][1]["path"]).write_bytes(content)
    _refused(rocks_store, staged, "files[1].path", "not an SST file")


# ------------------------------------------------------------- out-of-range times

TOO_BIG = 2**64


def _out_of_range_calls() -> list[tuple[str, str, Callable[[RocksTimerStore], object]]]:
    return [
        ("schedule", "timers[0].deliver_at_ms", lambda s: s.schedule([nt("o", TOO_BIG)], NOW)),
        (
            "schedule-2nd",
            "timers[1].deliver_at_ms",
            lambda s: s.schedule([nt("ok", NOW), nt("o", 2**64 - 1)], NOW),
        ),
        ("schedule-now", "now_ms", lambda s: s.schedule([nt("o", NOW)], TOO_BIG)),
        ("due", "now_ms", lambda s: s.due(TOO_BIG, 10)),
        ("due-negative", "now_ms", lambda s: s.due(-2, 10)),
        ("list-to", "to_ms", lambda s: s.list_pending(to_ms=2**64 - 1)),
        ("list-from", "from_ms", lambda s: s.list_pending(from_ms=TOO_BIG)),
        ("list-negative", "from_ms", lambda s: s.list_pending(from_ms=-1)),
        ("read_log", "offset", lambda s: s.read_log("t", TOO_BIG, 10)),
        ("count", "deadlines_ms[1]", lambda s: s.count_pending_due_before([NOW, TOO_BIG], 10)),
        ("count-negative", "deadlines_ms[0]", lambda s: s.count_pending_due_before([-1], 10)),
        ("journal", "since_ms", lambda s: s.journal(-1)),
        ("commit", "delivered_ms", lambda s: s.commit_delivered([], TOO_BIG, sink=LOG_SINK)),
        ("retry", "retry_at_ms", lambda s: s.retry_later([], TOO_BIG, "x")),
        ("dead_letter", "now_ms", lambda s: s.dead_letter([], TOO_BIG, "x")),
        ("replay", "now_ms", lambda s: s.replay_dead_letter("t", "o", TOO_BIG)),
        ("housekeep", "now_ms", lambda s: s.housekeep(TOO_BIG)),
    ]


@pytest.mark.parametrize(
    ("field", "call"),
    [c[1:] for c in _out_of_range_calls()],
    ids=[c[0] for c in _out_of_range_calls()],
)
def test_out_of_range_times_are_refused_naming_the_field(rocks_store, field, call):
    rocks_store.schedule([nt("kept", NOW)], NOW)
    with pytest.raises(InvalidInputError) as caught:
        call(rocks_store)
    assert caught.value.field == field
    assert str(layout.MAX_TIME_MS) in caught.value.message
    assert [v.id for v in rocks_store.list_pending().timers] == ["kept"]  # nothing else


def test_the_largest_time_is_scheduled_and_delivered(rocks_store):
    top = layout.MAX_TIME_MS
    rocks_store.schedule([nt("last", top)], NOW)
    assert [v.id for v in rocks_store.list_pending(from_ms=top, to_ms=top).timers] == ["last"]
    assert rocks_store.count_pending_due_before([top, top], 10) == [0, 0]
    [due] = rocks_store.due(top, 10)
    rocks_store.commit_delivered([due], top, sink=LOG_SINK)
    assert rocks_store.read_log("t", layout.MAX_OFFSET, 10) == []
    assert [e.id for e in rocks_store.journal(top)] == ["last"]
