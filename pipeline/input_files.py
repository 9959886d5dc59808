"""The files of a local input directory that Spark would read, so that a directory holding
none of the expected format is refused in one line before Spark starts (Spark itself fails
with a long JVM trace: "Unable to infer schema for Parquet. It must be specified manually").

Spark's listing (``InMemoryFileIndex``, checked against Spark 4 by
``tests/pipeline/test_input_files.py``): names starting with ``_`` (unless they hold ``=``)
or ``.``, and names ending in ``._COPYING_``, are skipped at every level; the files directly
in the directory are read, and the files in its subdirectories only when partition
discovery finds a ``key=value`` directory above some of them (then all of them are read).
The check may let through an input Spark then refuses; it must never refuse one Spark reads.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator

from storage.errors import InvalidInputError

FORMAT_SUFFIXES = {
    "parquet": (".parquet",),
    "csv": (".csv",),
    "jsonl": (".jsonl", ".json", ".ndjson"),
}
FORMAT_LABELS = {"parquet": "Parquet", "csv": "CSV", "jsonl": "JSON Lines"}
# Hadoop's codecs: Spark reads ``rows.csv.gz`` as CSV (Parquet compresses inside the file)
CODEC_SUFFIXES = (".gz", ".bz2", ".deflate", ".lz4", ".snappy", ".zst")
# Parquet's summary files: listed by Spark, but they hold no rows
PARQUET_SUMMARIES = ("_metadata", "_common_metadata")


def format_of_name(name: str) -> str | None:
    """The format a file name's suffix says (a codec suffix after it allowed), else None."""
    name = name.lower()
    for codec in CODEC_SUFFIXES:
        if name.endswith(codec):
            name = name.removesuffix(codec)
            break
    for fmt, suffixes in FORMAT_SUFFIXES.items():
        if name.endswith(suffixes):
            return fmt
    return None


def is_data_file(name: str, fmt: str) -> bool:
    """A file of ``fmt`` by its name; a name without any suffix (Hadoop's ``part-r-00000``)
    counts too, since Spark reads any file in the format it is told."""
    if name.startswith(PARQUET_SUMMARIES):
        return False
    return format_of_name(name) == fmt or "." not in name


def skipped_by_spark(name: str) -> bool:
    """Spark's ``HadoopFSUtils.shouldFilterOutPathName``, for a file or a directory."""
    if name.startswith(PARQUET_SUMMARIES):
        return False
    hidden = (name.startswith("_") and "=" not in name) or name.startswith(".")
    return hidden or name.endswith("._COPYING_")


def _walk(directory: str, below: tuple[str, ...], seen: set[str]) -> Iterator[tuple[str, ...]]:
    """Relative paths (as parts) of the files Spark lists under ``directory``, at any depth;
    a directory reached twice through symbolic links is walked once."""
    real = os.path.realpath(directory)
    if real in seen:
        return
    seen.add(real)
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError:
        return  # an unreadable subdirectory: Spark says so itself
    for entry in entries:
        if skipped_by_spark(entry.name):
            continue
        if entry.is_dir():
            yield from _walk(entry.path, (*below, entry.name), seen)
        else:
            yield (*below, entry.name)


def files_spark_reads(directory: str) -> list[str]:
    """The files (relative paths) Spark reads from ``directory`` without recursiveFileLookup."""
    top: list[tuple[str, ...]] = []
    nested: list[tuple[str, ...]] = []
    for parts in _walk(directory, (), set()):
        (top if len(parts) == 1 else nested).append(parts)
    partitioned = any("=" in name for parts in nested for name in parts[:-1])
    return [os.path.join(*parts) for parts in (top + nested if partitioned else top)]


def check_input_files(
    path: str, field: str, fmt: str, *, any_name: bool = False, format_option: str | None = None
) -> None:
    """InvalidInputError naming ``field`` and ``path`` when a local input directory (or every
    directory a glob matches) holds no file of ``fmt`` that Spark would read. A file, a URL
    (only the cluster can see it) or a path that matches nothing is left alone here.

    ``any_name``: the format was given, and Spark reads every file it lists in that format
    whatever its name (CSV files named ``*.txt``), so any such file will do.
    ``format_option`` (the import's ``--format``) is suggested when the files Spark would
    read are all of one other format."""
    if "://" in path and not path.startswith("file://"):
        return
    matches = sorted(glob.glob(path.removeprefix("file://")))
    if not matches or not all(os.path.isdir(match) for match in matches):
        return
    if not all(os.access(match, os.R_OK | os.X_OK) for match in matches):
        return  # unreadable: Spark says so (one cannot tell what it holds)
    readable = [name for match in matches for name in files_spark_reads(match)]
    if any(any_name or is_data_file(os.path.basename(name), fmt) for name in readable):
        return
    expected = ", ".join(f"*{suffix}" for suffix in FORMAT_SUFFIXES[fmt])
    message = (
        f"no files Spark reads in {field} {path}"
        if any_name
        else f"no {FORMAT_LABELS[fmt]} files ({expected}) in {field} {path}"
    )
    other = _single_format(readable)
    if format_option and other:
        message += f": it holds {FORMAT_LABELS[other]} files; give {format_option} {other}"
    elif len(matches) == 1:
        message += _contents(matches[0])
    raise InvalidInputError(message, field=field)


def _single_format(names: list[str]) -> str | None:
    """The format all these files have by their names, if they have one."""
    formats = {format_of_name(os.path.basename(name)) for name in names}
    return formats.pop() if len(formats) == 1 else None


def _contents(directory: str, shown: int = 3) -> str:
    """What the directory holds instead (a few names, ``/`` after a directory), and why
    Spark skips them when it does."""
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError:
        return ""
    if not entries:
        return ": the directory is empty"
    names = [entry.name + ("/" if entry.is_dir() else "") for entry in entries]
    listed = ", ".join(names[:shown]) + (
        f" and {len(names) - shown} more" if len(names) > shown else ""
    )
    rules = []
    if any(skipped_by_spark(entry.name) for entry in entries):
        rules.append("skips names starting with _ or .")
    if any(entry.is_dir() and "=" not in entry.name for entry in entries):
        rules.append("reads a subdirectory only when it is named key=value")
    why = f" (Spark {' and '.join(rules)})" if rules else ""
    return f": it holds {listed}{why}"
