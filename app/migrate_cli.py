"""``timerstore migrate``: rewrite a format-1 RocksDB data directory in the current format.

Run it with the service stopped and the same settings (``--data-dir`` or
``TIMERSTORE_DATA_DIR``); ``storage.rocks.migrate`` says what it copies and how it keeps
the old directory safe.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from app.config import load_settings
from storage.errors import StoreCorruptError, StoreOpenError
from storage.rocks.db import FORMAT_VERSION, is_format_1
from storage.rocks.migrate import migrate_format_1

EXIT_NOT_MIGRATED = 1


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "migrate",
        help="rewrite a format-1 RocksDB data directory in the current format (service stopped)",
        description=(
            "Rewrite a format-1 RocksDB data directory in the current format. Stop the "
            "service first and give the same settings (--data-dir or TIMERSTORE_DATA_DIR). "
            "The old directory is kept beside the new one as rocks.format-1."
        ),
    )
    parser.add_argument("--data-dir", dest="data_dir", help="data directory (default ./data)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Migrate; ConfigError and StoreOpenError (also: no store at all) are reported by the
    console script."""
    settings = load_settings(overrides={"data_dir": args.data_dir}).rocks_settings()
    if not os.path.exists(os.path.join(settings.path, "CURRENT")):
        # no store at all (a mistyped --data-dir): not "nothing to migrate" and exit 0
        raise StoreOpenError(
            f"no RocksDB store at {settings.path}: check --data-dir (or TIMERSTORE_DATA_DIR)"
        )
    if not is_format_1(settings.path):
        print(f"{settings.path}: nothing to migrate (not a format-1 directory)")
        return 0
    try:
        report = migrate_format_1(settings)
    except StoreCorruptError as exc:
        print(f"timerstore migrate: {exc.message}", file=sys.stderr)
        return EXIT_NOT_MIGRATED
    print(
        f"{report.path}: migrated to format {FORMAT_VERSION}: {report.pending} pending, "
        f"{report.delivered_records} delivery records, {report.log_messages} log messages "
        f"in {report.log_pages} pages, {report.dead_letters} dead letters. The format-1 "
        f"directory is kept as {report.backup}; delete it once the service runs."
    )
    return 0
