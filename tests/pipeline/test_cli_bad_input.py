"""Bad input to ``timerstore import`` / ``analyze`` is one line on stderr and exit 2 (the
console script's InvalidInputError), never a traceback, and leaves no staging directory.
A missing input, or a directory holding no file of the input's format that Spark would
read, is refused before Spark starts; the rest need the job to run first."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from storage.rocks import RocksSettings, RocksTimerStore
from tests.api.helpers import ThreadServer, free_port, make_settings
from tests.pipeline.helpers import NOW

ROOT = Path(__file__).resolve().parents[2]


def _timerstore(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "timerstore", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The last stderr line, after checking it is the only one besides progress and Spark's
    JVM chatter, that the exit is 2 and that no traceback was printed."""
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    ours = [line for line in done.stderr.splitlines() if line.startswith("timerstore ")]
    assert len(ours) == 1, done.stderr[-3000:]
    assert done.stderr.rstrip().endswith(ours[0]), done.stderr[-3000:]
    return ours[0]


def test_import_of_a_missing_input_is_one_line_and_leaves_no_stage_dir(tmp_path):
    missing, data = tmp_path / "nope.csv", tmp_path / "data"
    done = _timerstore("import", str(missing), "--data-dir", str(data), timeout=60)
    line = _one_line(done)
    assert line == f"timerstore import: input {missing} does not exist"
    assert done.stderr.strip() == line  # refused before Spark: nothing else was printed
    assert not (data / "staging").exists()

    stage = tmp_path / "stage"
    done = _timerstore(
        *("import", str(missing), "--server", "http://127.0.0.1:9"),
        *("--stage-dir", str(stage)),
        timeout=60,
    )
    assert _one_line(done) == line
    assert not stage.exists()


def test_analyze_of_a_missing_path_is_one_line(tmp_path):
    done = _timerstore("analyze", str(tmp_path / "none"), "--out", str(tmp_path / "r"), timeout=60)
    assert _one_line(done) == f"timerstore analyze: deliveries {tmp_path / 'none'} does not exist"
    assert done.stderr.strip().count("\n") == 0


def _layout(root: Path, files: dict[str, str]) -> Path:
    """A directory holding ``files`` (relative path -> text)."""
    root.mkdir()
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


CSV_ROWS = f"topic,id,deliver_at_ms\norders,a,{NOW + 1000}\n"

IMPORT_DIRS_WITHOUT_INPUT = {  # files, --format, what the line says after the directory
    "empty": ({}, [], "no Parquet files (*.parquet) in input {dir}: the directory is empty"),
    "only a readme": (
        {"README.txt": "rows go here\n"},
        [],
        "no Parquet files (*.parquet) in input {dir}: it holds README.txt",
    ),
    "what Spark skips": (
        {"_SUCCESS": "", ".part-0.jsonl.crc": "", "_tmp/part-0.jsonl": "{}\n", "old/a.jsonl": ""},
        ["--format", "jsonl"],
        "no files Spark reads in input {dir}: it holds"
        " .part-0.jsonl.crc, _SUCCESS, _tmp/ and 1 more (Spark skips names starting with _"
        " or . and reads a subdirectory only when it is named key=value)",
    ),
    "CSV files taken for Parquet": (
        {"a.csv": CSV_ROWS, "b.csv": CSV_ROWS},
        [],
        "no Parquet files (*.parquet) in input {dir}: it holds CSV files; give --format csv",
    ),
}


@pytest.mark.parametrize("case", IMPORT_DIRS_WITHOUT_INPUT)
def test_import_of_a_directory_without_input_files_is_one_line_before_spark(tmp_path, case):
    files, format_args, message = IMPORT_DIRS_WITHOUT_INPUT[case]
    rows, data = _layout(tmp_path / "rows", files), tmp_path / "data"
    done = _timerstore("import", str(rows), *format_args, "--data-dir", str(data), timeout=60)
    line = _one_line(done)
    assert line == "timerstore import: " + message.format(dir=rows)
    assert done.stderr.strip() == line  # refused before Spark: nothing else was printed
    assert not data.exists()  # nor was the store opened or a stage directory made


def test_analyze_of_a_directory_without_parquet_files_is_one_line_before_spark(tmp_path):
    out = tmp_path / "report"
    empty = _layout(tmp_path / "empty", {})
    done = _timerstore("analyze", str(empty), "--out", str(out), timeout=60)
    assert _one_line(done) == (
        f"timerstore analyze: no Parquet files (*.parquet) in deliveries {empty}: "
        "the directory is empty"
    )
    assert done.stderr.strip().count("\n") == 0

    spark_output = _layout(tmp_path / "job", {"_SUCCESS": "", ".part-0.parquet.crc": ""})
    done = _timerstore("analyze", f"file://{spark_output}", "--out", str(out), timeout=60)
    assert _one_line(done) == (
        f"timerstore analyze: no Parquet files (*.parquet) in deliveries file://{spark_output}: "
        "it holds .part-0.parquet.crc, _SUCCESS (Spark skips names starting with _ or .)"
    )
    assert done.stderr.strip().count("\n") == 0
    assert not out.exists()


def _write_input(tmp_path: Path) -> Path:
    path = tmp_path / "in.csv"
    path.write_text(f"topic,id,deliver_at_ms\norders,a,{NOW + 1000}\n")
    return path


@pytest.mark.spark
def test_import_to_a_server_nobody_listens_on_is_one_line(tmp_path):
    server = f"http://127.0.0.1:{free_port()}"
    stage = tmp_path / "stage"
    done = _timerstore(
        *("import", str(_write_input(tmp_path)), "--server", server),
        *("--stage-dir", str(stage), "--master", "local[1]"),
    )
    line = _one_line(done)
    assert line.startswith(f"timerstore import: cannot reach the server at {server} (--server)")
    assert f"the staged import is kept in {stage}" in line
    assert (stage / "manifest.json").exists()


@pytest.mark.spark
def test_import_refused_by_the_server_is_one_line(tmp_path):
    live = tmp_path / "live"
    srv = ThreadServer(make_settings(live, admin_keys=["adm"]))
    url = srv.start()
    try:
        done = _timerstore(
            *("import", str(_write_input(tmp_path)), "--server", url, "--admin-key", "wrong"),
            *("--stage-dir", str(live / "staging" / "s1"), "--master", "local[1]"),
        )
    finally:
        srv.stop()
    line = _one_line(done)
    assert line.startswith(f"timerstore import: the server at {url} refused the ingest (401)")


@pytest.mark.spark
def test_analyze_of_an_empty_export_is_one_line_not_exit_1(tmp_path):
    data = tmp_path / "data"
    RocksTimerStore(RocksSettings(str(data / "rocks"))).close()  # a store with no deliveries
    exported = _timerstore(
        "export-deliveries", "--data-dir", str(data), "--out", str(tmp_path / "d"), timeout=60
    )
    assert exported.returncode == 0, exported.stderr
    done = _timerstore(
        "analyze", str(tmp_path / "d"), "--out", str(tmp_path / "r"), "--master", "local[1]"
    )
    assert (
        _one_line(done)
        == f"timerstore analyze: no deliveries in {tmp_path / 'd'}: nothing to analyze"
    )
