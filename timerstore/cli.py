"""The ``timerstore`` console script: the composition root, above every layer.

Each subcommand lives with the package it drives (``api.server``, ``app.migrate_cli``,
``bench.cli``, ``pipeline.cli``) and offers ``register(subparsers)``. They are imported
here with plain imports: this module is the only one allowed to see every layer, and a
subcommand whose import fails is an error, not a silently missing command.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from api import server
from app import migrate_cli
from bench import cli as bench_cli
from pipeline import cli as pipeline_cli
from storage.errors import ConfigError, InvalidInputError, StoreOpenError
from timerstore import cluster_up

COMMANDS = (server, migrate_cli, bench_cli, pipeline_cli, cluster_up)
EXIT_BAD_INPUT = 2  # as argparse's usage errors


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="timerstore", description=__doc__)
    subparsers = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand; a bad setting, an unopenable store or a bad input (an import's
    manifest or stage directory) is one line, not a trace."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except ConfigError as exc:
        print(f"timerstore {args.command}: {exc.message}", file=sys.stderr)
        return server.EXIT_BAD_SETTINGS
    except StoreOpenError as exc:
        print(f"timerstore {args.command}: {exc.message}", file=sys.stderr)
        return server.EXIT_STORE_UNAVAILABLE
    except InvalidInputError as exc:
        print(f"timerstore {args.command}: {exc.message}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
