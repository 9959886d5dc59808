"""Bad arguments to the pipeline's commands are one line on stderr and exit 2, never a
traceback: an ``--out`` that cannot be a directory (export-deliveries, and analyze before
Spark starts), a ``--conf`` without ``=``, CSV files of one input whose headers differ
(refused before Spark: Spark would read the second file's fields by the first's header),
and the same rules under ``spark-submit``'s entry points (``pipeline/jobs/*.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.csv_input import check_csv_headers
from pipeline.deliveries import write_deliveries
from storage.errors import InvalidInputError
from storage.rocks import RocksSettings, RocksTimerStore
from tests.pipeline.helpers import NOW

ROOT = Path(__file__).resolve().parents[2]


def _run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, **(env or {})},
    )


def _one_line(done: subprocess.CompletedProcess[str], prog: str) -> str:
    """The only stderr line, after checking the exit is 2 and no traceback was printed."""
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr[-3000:]
    assert lines[0].startswith(f"{prog}: "), lines
    return lines[0]


def _deliveries(tmp_path: Path) -> Path:
    out = tmp_path / "deliveries"
    write_deliveries(str(out), [("t", "a", NOW, NOW, NOW + 5, 1, "rocks", NOW - 10)])
    return out


def _store(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    RocksTimerStore(RocksSettings(str(data / "rocks"))).close()
    return data


def test_export_to_an_out_that_is_a_file_is_one_line(tmp_path):
    data, taken = _store(tmp_path), tmp_path / "taken"
    taken.write_text("not a directory")
    done = _run(
        *("-m", "timerstore", "export-deliveries"), *("--data-dir", str(data), "--out", str(taken))
    )
    line = _one_line(done, "timerstore export-deliveries")
    assert f"cannot create the output directory {taken}" in line and "--out" in line
    assert taken.read_text() == "not a directory"


def test_analyze_to_an_out_that_is_a_file_is_one_line_before_spark(tmp_path):
    deliveries, taken = _deliveries(tmp_path), tmp_path / "taken"
    taken.write_text("not a directory")
    done = _run("-m", "timerstore", "analyze", str(deliveries), "--out", str(taken))
    line = _one_line(done, "timerstore analyze")
    assert f"cannot create the output directory {taken}" in line and "--out" in line


def test_a_conf_without_a_value_is_one_line_and_exit_2(tmp_path):
    deliveries = _deliveries(tmp_path)
    done = _run(
        *("-m", "timerstore", "analyze", str(deliveries), "--out", str(tmp_path / "r")),
        *("--conf", "spark.driver.memory"),
    )
    line = _one_line(done, "timerstore analyze")
    assert line == "timerstore analyze: --conf wants KEY=VALUE, got 'spark.driver.memory'"


def _csv_files(directory: Path, headers: list[str]) -> Path:
    directory.mkdir()
    for i, header in enumerate(headers):
        (directory / f"part-{i}.csv").write_text(f"{header}\norders,a{i},{NOW + 1000},p\n")
    return directory


def test_csv_files_with_different_headers_are_refused_before_spark(tmp_path):
    """Spark names the columns by one file's header and reads the others by position: the
    second file's ids would be stored as topics and its topics as ids."""
    headers = ["topic,id,deliver_at_ms,payload", "id,topic,deliver_at_ms,payload"]
    rows = _csv_files(tmp_path / "in", headers)
    data = tmp_path / "data"
    done = _run("-m", "timerstore", "import", str(rows), "--format", "csv", "--data-dir", str(data))
    line = _one_line(done, "timerstore import")
    assert f"input {rows / 'part-1.csv'} has the header id,topic,deliver_at_ms,payload" in line
    assert "every CSV file of an input must have the same header" in line
    assert not (data / "staging").exists()


def test_csv_header_check_reads_compressed_files_and_lets_equal_headers_pass(tmp_path):
    import gzip

    rows = _csv_files(tmp_path / "same", ["topic,id,deliver_at_ms,payload"] * 2)
    check_csv_headers(str(rows))  # equal headers: nothing to say
    (rows / "bom.csv").write_bytes(b"\xef\xbb\xbftopic,id,deliver_at_ms,payload\r\n")
    check_csv_headers(str(rows))  # a byte order mark (Excel's UTF-8 CSV): Spark drops it
    with gzip.open(rows / "part-2.csv.gz", "wt") as f:
        f.write(f"topic,id,payload,deliver_at_ms\norders,z,p,{NOW}\n")
    (rows / "empty.csv").write_text("")  # no header at all: Spark reads no row of it
    with pytest.raises(InvalidInputError, match=r"part-2\.csv\.gz has the header"):
        check_csv_headers(str(rows))
    check_csv_headers(str(rows / "part-0.csv"))  # one file: nothing to compare


def test_import_job_of_a_missing_input_is_one_line(tmp_path):
    missing = tmp_path / "nope.csv"
    done = _run("pipeline/jobs/import_job.py", str(missing), "--data-dir", str(tmp_path / "d"))
    assert _one_line(done, "import_job.py") == f"import_job.py: input {missing} does not exist"


def test_analyze_job_of_a_missing_path_is_one_line(tmp_path):
    missing = tmp_path / "none"
    done = _run("pipeline/jobs/analyze_job.py", str(missing), "--out", str(tmp_path / "r"))
    line = _one_line(done, "analyze_job.py")
    assert line == f"analyze_job.py: deliveries {missing} does not exist"


def test_an_empty_data_dir_is_named_as_such_not_taken_for_server(tmp_path):
    rows = tmp_path / "rows.csv"
    rows.write_text(f"topic,id,deliver_at_ms\norders,a,{NOW}\n")
    done = _run("-m", "timerstore", "import", str(rows), "--data-dir=")
    assert _one_line(done, "timerstore import") == "timerstore import: data_dir must not be empty"
    done = _run("-m", "timerstore", "import", str(rows), "--server", "http://127.0.0.1:9")
    line = _one_line(done, "timerstore import")
    assert line == "timerstore import: --server needs --stage-dir (a directory the server can read)"


@pytest.mark.parametrize("where", ["a directory", "under a file"])
def test_a_rejects_path_that_cannot_be_written_is_one_line_before_spark(tmp_path, where):
    rows = tmp_path / "rows.csv"
    rows.write_text(f"topic,id,deliver_at_ms\norders,a,{NOW}\norders,bad id,{NOW}\n")
    (tmp_path / "file").write_text("")
    rejects = tmp_path if where == "a directory" else tmp_path / "file" / "rejects.csv"
    done = _run(
        *("-m", "timerstore", "import", str(rows), "--data-dir", str(tmp_path / "data")),
        *("--rejects", str(rejects)),
    )
    line = _one_line(done, "timerstore import")
    assert line.startswith(f"timerstore import: cannot write the rejects file {rejects}: ")
    assert line.endswith("; choose another --rejects")


@pytest.mark.parametrize(
    ("option", "value", "rule"),
    [
        ("--partitions", "-1", "must be a whole number of at least 1"),  # was a Spark trace
        ("--base-ms", "-100000", "must be epoch milliseconds from 0 to 253402300799999"),
        ("--now-ms", "-1", "must be epoch milliseconds from 0 to 253402300799999"),
    ],
)
def test_an_import_number_out_of_range_is_a_usage_error_before_spark(tmp_path, option, value, rule):
    """A negative --base-ms or --now-ms imported timers with negative requested or creation
    times, which no API call can store; --partitions -1 failed in Spark with a trace."""
    rows = tmp_path / "rows.csv"
    rows.write_text("topic,id,delay_ms\norders,a,0\n")
    data = tmp_path / "data"
    done = _run("-m", "timerstore", "import", str(rows), "--data-dir", str(data), option, value)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last == f"timerstore import: error: argument {option}: {rule}, got '{value}'"
    assert not data.exists()


@pytest.mark.parametrize("command", ["import", "analyze"])
def test_a_master_spark_cannot_parse_is_a_usage_error_before_the_jvm(tmp_path, command):
    """Spark refuses it in the JVM ("Master must either be yarn or start with spark, k8s,
    or local"): 40 lines of Java and Python traces and exit 1."""
    deliveries = _deliveries(tmp_path)
    target = ("--data-dir", str(tmp_path / "data")) if command == "import" else ("--out", "r")
    done = _run("-m", "timerstore", command, str(deliveries), *target, "--master", "nosuch")
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "Exception" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"timerstore {command}: error: argument --master: must be local, local[N], local[*], "
        "spark://HOST:PORT, k8s://... or yarn, got 'nosuch'"
    )


def test_an_offline_import_for_a_wheel_service_is_refused_before_spark(tmp_path):
    """The import writes ``<data_dir>/rocks``; a service with store=wheel reads
    ``<data_dir>/wheel``: the import said it added the timers, and the service never saw
    them (its server refuses the same ingest with a 409)."""
    rows = tmp_path / "rows.csv"
    rows.write_text(f"topic,id,deliver_at_ms\norders,a,{NOW}\n")
    data = tmp_path / "data"
    done = _run(
        *("-m", "timerstore", "import", str(rows), "--data-dir", str(data)),
        env={"TIMERSTORE_STORE": "wheel"},
    )
    line = _one_line(done, "timerstore import")
    assert line.startswith("timerstore import: the wheel store cannot ingest SST files")
    assert not data.exists()
