"""``pipeline.input_files``: the files Spark would read from an input directory, so that one
holding none of the input's format is refused before Spark starts, and an input Spark reads
is never refused. The listing is checked against Spark's own (``inputFiles``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipeline.importer import guess_format
from pipeline.input_files import check_input_files, files_spark_reads
from storage.errors import InvalidInputError

LAYOUTS = {  # files of the directory -> the ones Spark reads
    "empty": ([], []),
    "a readme": (["README.txt"], ["README.txt"]),
    "hidden and half-copied": (["_SUCCESS", ".a.crc", "a.parquet._COPYING_"], []),
    "Parquet summaries": (["_metadata", "_common_metadata"], ["_common_metadata", "_metadata"]),
    "a plain subdirectory": (["a.parquet", "sub/b.parquet"], ["a.parquet"]),
    "only a plain subdirectory": (["sub/a.parquet"], []),
    "hidden subdirectories": (["_tmp/a.parquet", ".h/b.parquet", ".k=1/c.parquet"], []),
    "partitions": (
        ["k=1/j=2/a.parquet", "k=2/j=3/sub/b.parquet"],
        ["k=1/j=2/a.parquet", "k=2/j=3/sub/b.parquet"],
    ),
    "partitions below a plain directory": (["sub/k=1/a.parquet"], ["sub/k=1/a.parquet"]),
    "partitions beside files": (["a.parquet", "k=1/b.parquet"], ["a.parquet", "k=1/b.parquet"]),
    "an underscored partition": (["_k=1/a.parquet"], ["_k=1/a.parquet"]),
    "hidden files in partitions": (["k=1/_SUCCESS", "k=2/.b.parquet", "k=2/_c/d.parquet"], []),
    "an empty partition beside a subdirectory": (["k=1/_SUCCESS", "sub/a.parquet"], []),
}


def _expected(name: str) -> list[str]:
    return sorted(LAYOUTS[name][1])


def _make(root: Path, files: list[str]) -> Path:
    root.mkdir()
    for name in files:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("x\n")
    return root


@pytest.mark.parametrize("name", LAYOUTS)
def test_the_files_spark_reads(tmp_path: Path, name: str) -> None:
    root = _make(tmp_path / "in", LAYOUTS[name][0])
    assert sorted(files_spark_reads(str(root))) == _expected(name)


def test_a_partition_reached_through_a_symbolic_link_and_a_link_cycle(tmp_path: Path) -> None:
    target = _make(tmp_path / "elsewhere", ["a.parquet"])
    root = _make(tmp_path / "in", [])
    (root / "k=1").symlink_to(target)
    (target / "k=2").symlink_to(root)  # a cycle: in/k=1/k=2 is in again
    assert "k=1/a.parquet" in files_spark_reads(str(root))


@pytest.mark.spark
@pytest.mark.parametrize("name", LAYOUTS)
def test_the_listing_is_sparks(spark, tmp_path: Path, name: str) -> None:
    root = _make(tmp_path / "in", LAYOUTS[name][0])
    read = spark.read.text(str(root)).inputFiles()  # text: any file, and no schema to infer
    assert sorted(os.path.relpath(f.removeprefix("file:"), root) for f in read) == _expected(name)


@pytest.mark.parametrize(
    ("files", "path", "fmt"),
    [
        (["in/part-r-00000"], "in", "csv"),  # Hadoop's names carry no suffix
        (["in/rows.CSV.gz", "in/README.txt"], "in", "csv"),
        (["in/a.ndjson.bz2"], "in", "jsonl"),
        (["in/k=1/part-0.snappy.parquet", "in/_SUCCESS"], "in", "parquet"),
        (["README.txt"], "README.txt", "parquet"),  # a file is read as the user says
        (["a/x.txt", "b/y.parquet"], "*", "parquet"),  # a glob: one directory has some
        (["c.txt"], "*", "parquet"),  # a glob matching a file
    ],
)
def test_an_input_spark_reads_passes(tmp_path: Path, files: list[str], path: str, fmt: str) -> None:
    _make(tmp_path / "root", files)
    check_input_files(str(tmp_path / "root" / path), "input", fmt)
    check_input_files(f"file://{tmp_path / 'root' / path}", "input", fmt)


def test_urls_and_missing_paths_are_left_to_the_other_checks(tmp_path: Path) -> None:
    check_input_files("hdfs://namenode/rows", "input", "parquet")
    check_input_files(str(tmp_path / "missing"), "input", "parquet")  # "does not exist"


def test_a_glob_of_directories_without_input_is_refused(tmp_path: Path) -> None:
    _make(tmp_path / "a", ["x.txt"])
    _make(tmp_path / "b", ["sub/y.parquet"])
    with pytest.raises(InvalidInputError) as caught:
        check_input_files(str(tmp_path / "?"), "deliveries", "parquet")
    assert caught.value.field == "deliveries"
    assert caught.value.message == f"no Parquet files (*.parquet) in deliveries {tmp_path}/?"


def test_the_format_hint_names_the_one_other_format(tmp_path: Path) -> None:
    root = _make(tmp_path / "in", ["a.jsonl", "b.json.gz"])
    with pytest.raises(InvalidInputError) as caught:
        check_input_files(str(root), "input", "csv", format_option="--format")
    assert caught.value.message.endswith(": it holds JSON Lines files; give --format jsonl")
    _make(tmp_path / "in2", ["a.jsonl", "b.parquet.txt"])  # not one format: the names
    with pytest.raises(InvalidInputError) as caught:
        check_input_files(str(tmp_path / "in2"), "input", "csv", format_option="--format")
    assert caught.value.message.endswith(": it holds a.jsonl, b.parquet.txt")


@pytest.mark.parametrize(
    ("path", "fmt"),
    [
        ("rows.parquet", "parquet"),
        ("rows.csv.gz", "csv"),
        ("rows.json.gz", "jsonl"),
        ("Rows.NDJSON", "jsonl"),
        ("rows.csv.bz2", "csv"),
        ("dir.jsonl/", "jsonl"),
        ("rows", "parquet"),
        ("rows.txt", "parquet"),
    ],
)
def test_the_format_guessed_from_the_name(path: str, fmt: str) -> None:
    assert guess_format(path) == fmt


def test_a_given_format_takes_files_of_any_name(tmp_path: Path) -> None:
    """``--format csv`` on a directory of ``*.txt``: Spark reads them as CSV, so the check
    must not refuse them; with nothing Spark reads, it still does."""
    _make(tmp_path / "in", ["rows.txt"])
    check_input_files(str(tmp_path / "in"), "input", "csv", any_name=True)
    with pytest.raises(InvalidInputError):
        check_input_files(str(tmp_path / "in"), "input", "csv")
    _make(tmp_path / "skipped", ["_SUCCESS", "old/rows.txt"])
    with pytest.raises(InvalidInputError) as caught:
        check_input_files(str(tmp_path / "skipped"), "input", "csv", any_name=True)
    assert caught.value.message.startswith(f"no files Spark reads in input {tmp_path}/skipped")
