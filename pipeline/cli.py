"""``timerstore import``, ``timerstore export-deliveries`` and ``timerstore analyze``.

``register(subparsers)`` is called by ``timerstore.cli`` (the composition root); the
handlers import PySpark only when they run. ``pipeline/jobs/*.py`` run the same handlers
under ``spark-submit``.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import msgspec

from app.config import Settings, load_settings
from pipeline.csv_input import check_csv_headers
from pipeline.importer import FORMATS, guess_format
from pipeline.input_files import check_input_files
from storage.errors import ConfigError, InvalidInputError, StoreOpenError
from storage.rules import MAX_TIME_MS

EXIT_BAD_INPUT = 2  # a bad argument, setting or input (as argparse's usage errors)
EXIT_STORE_UNAVAILABLE = 3  # the data directory cannot be opened (as ``timerstore serve``)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _progress(message: str) -> None:
    print(f"[timerstore] {message}", file=sys.stderr, flush=True)


def _print(obj: Any) -> None:
    sys.stdout.write(msgspec.json.format(msgspec.json.encode(obj)).decode() + "\n")


def _positive(text: str) -> int:
    """An argument that must be a whole number of at least 1 (argparse's usage error else)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, got {text!r}")
    return value


def _master(text: str) -> str:
    """A Spark master URL by Spark's own first rule (``yarn``, or ``spark...``, ``k8s...``,
    ``local...``), so that a typo is a usage error, not a JVM and Python trace."""
    if text == "yarn" or text.startswith(("spark", "k8s", "local")):
        return text
    raise argparse.ArgumentTypeError(
        f"must be local, local[N], local[*], spark://HOST:PORT, k8s://... or yarn, got {text!r}"
    )


def _time_ms(text: str) -> int:
    """An epoch-ms argument: 0 to the API's latest time (a negative --base-ms would store
    negative requested times, which no API call can make)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= MAX_TIME_MS:
        raise argparse.ArgumentTypeError(
            f"must be epoch milliseconds from 0 to {MAX_TIME_MS}, got {text!r}"
        )
    return value


def add_import_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", help="a file or directory of input rows")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--data-dir", help="import into the stopped store of this data directory")
    target.add_argument("--server", help="import into a running server at this URL")
    p.add_argument(
        "--master", default="local[*]", type=_master, help="Spark master (default local[*])"
    )
    p.add_argument("--format", choices=FORMATS, help="input format (default: by file name)")
    p.add_argument("--replace", action="store_true", help="replace timers already pending")
    p.add_argument("--base-ms", type=_time_ms, help="what delay_ms is relative to (default now)")
    p.add_argument("--now-ms", type=_time_ms, help="creation time of the records (default now)")
    p.add_argument(
        "--stage-dir",
        help="where to stage SSTs (default DATA_DIR/staging/import-*; required with --server)",
    )
    p.add_argument("--rejects", help="rejects output path (default STAGE_DIR/rejects.FORMAT)")
    p.add_argument("--partitions", type=_positive, help="SST files per family (default: by size)")
    p.add_argument("--admin-key", default="", help="admin key for --server")
    add_conf_argument(p)


def add_conf_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting, repeatable (e.g. spark.driver.host=import)",
    )


def _conf(args: argparse.Namespace) -> dict[str, str]:
    pairs = [item.partition("=") for item in args.conf]
    bad = [key for key, sep, _ in pairs if not sep or not key]
    if bad:
        raise InvalidInputError(f"--conf wants KEY=VALUE, got {bad[0]!r}", field="--conf")
    return {key: value for key, _, value in pairs}


def run_job(
    handler: Callable[[argparse.Namespace], int], args: argparse.Namespace, prog: str
) -> int:
    """A job's handler under ``spark-submit``, reporting as ``timerstore`` does: a bad
    argument, setting or input is one line on stderr and exit 2, an unopenable store exit 3."""
    try:
        return handler(args)
    except (ConfigError, InvalidInputError) as exc:
        print(f"{prog}: {exc.message}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except StoreOpenError as exc:
        print(f"{prog}: {exc.message}", file=sys.stderr)
        return EXIT_STORE_UNAVAILABLE


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "import",
        help="bulk-import timers through Spark and SST files",
        description=(
            "Bulk-import timers (Parquet, CSV or JSON lines) through Spark: rows are checked "
            "(rejects go to a file with the reason), encoded into RocksDB SST files and "
            "ingested, into a stopped store (--data-dir) or a running service (--server, "
            "with an admin key and a --stage-dir under <data_dir>/staging)."
        ),
    )
    add_import_arguments(p)
    p.set_defaults(handler=run_import_command)

    p = subparsers.add_parser(
        "export-deliveries",
        help="export the delivery history to Parquet",
        description=(
            "Export the delivery history of a RocksDB data directory (opened read-only) to "
            "Parquet files, one row per delivered timer: topic, id, requested, key and "
            "delivery times, attempts. `timerstore analyze` reads them. A failed export "
            "leaves an earlier export in --out as it was."
        ),
    )
    p.add_argument("--data-dir", required=True, help="the service's data directory")
    p.add_argument("--out", required=True, help="output directory of Parquet files")
    p.add_argument("--since-ms", type=int, default=0, help="deliveries at or after this time")
    p.set_defaults(handler=run_export_command)

    p = subparsers.add_parser(
        "analyze",
        help="lateness and throughput report (Spark)",
        description=(
            "Report lateness (p50/p90/p99/max per topic and minute), deliveries a second and "
            "early deliveries (must be 0) from an export-deliveries output; exit 1 if any "
            "delivery was early."
        ),
    )
    p.add_argument("deliveries", help="delivery history (Parquet, as export-deliveries writes)")
    p.add_argument("--out", required=True, help="report directory")
    p.add_argument(
        "--master", default="local[*]", type=_master, help="Spark master (default local[*])"
    )
    add_conf_argument(p)
    p.set_defaults(handler=run_analyze_command)


def service_settings(data_dir: str) -> Settings:
    """The service's settings (``TIMERSTORE_*`` included) for the store in ``data_dir``."""
    return load_settings(overrides={"data_dir": data_dir})


def offline_floor_ms(watermark_ms: int, now_ms: int) -> int:
    """The key time of past-due rows imported into a stopped store: its scan starts at its
    watermark; after a clock stepped back below that, now + 1, since the ingest (given
    ``now_ms``) then moves the watermark and the scan back there too."""
    return min(watermark_ms, now_ms + 1)


def run_import_command(args: argparse.Namespace) -> int:
    from pipeline import ingest_client
    from pipeline.importer import limits_of, run_import
    from pipeline.rows import JobTimes
    from pipeline.spark import input_read_errors, spark_session

    fmt = checked_input_format(args)  # before the store, the stage dir and Spark
    now_ms = args.now_ms if args.now_ms is not None else _now_ms()
    base_ms = args.base_ms if args.base_ms is not None else now_ms
    settings, store, floor_ms, stage_dir = _import_target(args, now_ms)
    try:
        # before Spark starts: a bad path fails in a second
        make_dir(stage_dir, "stage directory", "--stage-dir", "stage_dir")
        if args.rejects:
            check_rejects_path(args.rejects)
        with (
            spark_session(args.master, "timerstore-import", _conf(args)) as spark,
            input_read_errors("input", args.input),
        ):
            summary = run_import(
                spark,
                args.input,
                os.path.abspath(stage_dir),
                fmt=fmt,
                times=JobTimes(now_ms, base_ms, floor_ms),
                limits=limits_of(settings.limits),
                partitions=args.partitions,
                rejects_path=args.rejects,
                progress=_progress,
            )
        _progress(f"staged {summary.timers} timers in {summary.files} files; ingesting")
        if store is not None:
            report: Any = store.ingest_staged(
                summary.stage_dir,
                limits=limits_of(settings.limits),
                replace=args.replace,
                now_ms=now_ms,
            )
        else:
            report = ingest_client.post_ingest(
                args.server, summary.stage_dir, replace=args.replace, admin_key=args.admin_key
            )
    finally:
        if store is not None:
            store.close()
    _report_import(summary, report)
    return 0


def _import_target(args: argparse.Namespace, now_ms: int) -> tuple[Settings, Any, int, str]:
    """(settings, the stopped store opened or None for --server, clamp floor, stage dir).

    The importing side's TIMERSTORE_* settings: with --server, run it with the server's.
    ``is not None``: an empty --data-dir is the settings' error, not a missing option."""
    from storage.rocks import RocksTimerStore

    if args.data_dir is not None:
        settings = service_settings(args.data_dir)
        if settings.store != "rocks":  # as the server's ingest refuses it (409)
            raise ConfigError(
                f"the {settings.store} store cannot ingest SST files: the import writes the "
                f"RocksDB store ({settings.store_dir('rocks')}), which a service with "
                f"store={settings.store} does not read (TIMERSTORE_STORE)"
            )
        store = RocksTimerStore(settings.rocks_settings())
        floor_ms = offline_floor_ms(store.stats().watermark_ms, now_ms)
        stage_dir = args.stage_dir or os.path.join(settings.staging_dir(), f"import-{now_ms}")
        return settings, store, floor_ms, stage_dir
    if not args.stage_dir:
        raise InvalidInputError(
            "--server needs --stage-dir (a directory the server can read)", field="stage_dir"
        )
    # the ingest repairs what passed meanwhile
    return load_settings(), None, now_ms, args.stage_dir


def _report_import(summary: Any, report: Any) -> None:
    """Print the import's summary and ingest report, and keep them as summary.json."""
    result = {"import": msgspec.to_builtins(summary), "ingest": msgspec.to_builtins(report)}
    with open(os.path.join(summary.stage_dir, "summary.json"), "wb") as f:
        f.write(msgspec.json.format(msgspec.json.encode(result)))
    _print(result)


def checked_input_format(args: argparse.Namespace) -> str:
    """The import's input format (``--format``, else by name), once the input exists and,
    when it is a directory, holds files of that format that Spark would read."""
    check_input_exists(args.input, "input")
    fmt: str = args.format or guess_format(args.input)
    given = args.format is not None
    check_input_files(
        args.input, "input", fmt, any_name=given, format_option=None if given else "--format"
    )
    if fmt == "csv":
        check_csv_headers(args.input)
    return fmt


def check_input_exists(path: str, field: str) -> None:
    """InvalidInputError naming ``field`` when a local input path (a file, a directory or a
    glob, as Spark reads them) matches nothing. A URL (``hdfs://``, ``s3a://``) is left to
    Spark: only the cluster can see it."""
    if "://" in path and not path.startswith("file://"):
        return
    local = path.removeprefix("file://")
    if not glob.glob(local):
        raise InvalidInputError(f"{field} {path} does not exist", field=field)


def make_dir(path: str, what: str, option: str, field: str) -> None:
    """Create a directory the command writes into (``--stage-dir``, ``--out``), or an
    InvalidInputError naming ``field``, the cause and the option to change."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise InvalidInputError(
            f"cannot create the {what} {path}: {exc.strerror or exc}; choose another {option}",
            field=field,
        ) from exc
    if not os.access(path, os.W_OK | os.X_OK):
        raise InvalidInputError(
            f"the {what} {path} is not writable; choose another {option}", field=field
        )


def check_rejects_path(path: str) -> None:
    """InvalidInputError naming ``--rejects`` when the rejects file could not be written
    there (its directory, created here, is not writable, or the path is a directory):
    checked before Spark, not after the job has read and encoded every row."""
    directory = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as exc:
        reason = f"cannot create {directory}: {exc.strerror or exc}"
    else:
        reason = ""
        if os.path.isdir(path):
            reason = "it is a directory"
        elif not os.access(directory, os.W_OK | os.X_OK):
            reason = f"{directory} is not writable"
    if reason:
        raise InvalidInputError(
            f"cannot write the rejects file {path}: {reason}; choose another --rejects",
            field="--rejects",
        )


def run_export_command(args: argparse.Namespace) -> int:
    from pipeline.deliveries import export

    make_dir(args.out, "output directory", "--out", "--out")
    rows = export(service_settings(args.data_dir).store_dir("rocks"), args.out, args.since_ms)
    _print({"deliveries": rows, "out": args.out})
    return 0


def run_analyze_command(args: argparse.Namespace) -> int:
    from pipeline.analyze import analyze, to_dict
    from pipeline.spark import input_read_errors, spark_session

    check_input_exists(args.deliveries, "deliveries")
    check_input_files(args.deliveries, "deliveries", "parquet")
    make_dir(args.out, "output directory", "--out", "--out")  # before Spark starts
    with (
        spark_session(args.master, "timerstore-analyze", _conf(args)) as spark,
        input_read_errors("deliveries", args.deliveries),
    ):
        analysis = analyze(spark, args.deliveries, args.out)
    _print(to_dict(analysis))
    return 1 if analysis.overall.early else 0
