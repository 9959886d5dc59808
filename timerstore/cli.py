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
from typing import Any

from api import server
from app import migrate_cli
from bench import cli as bench_cli
from bench import single_inproc
from pipeline import cli as pipeline_cli
from storage.errors import ConfigError, InvalidInputError, StoreOpenError
from timerstore import cluster_up

COMMANDS = (server, migrate_cli, bench_cli, pipeline_cli, cluster_up)
EXIT_BAD_INPUT = 2  # as argparse's usage errors
DESCRIPTION = (
    "A durable timer service for delayed messages: schedule a message for a topic at a "
    "time over REST, and it is delivered when due. `timerstore COMMAND --help` describes "
    "each command."
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="timerstore", description=DESCRIPTION)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(subparsers)
    single_inproc.register(subparsers, _create_app)  # bench may not import api: handed in
    for command_parser in subparsers.choices.values():
        command_parser.set_defaults(command_parser=command_parser)
    return parser


def _create_app(settings: Any) -> Any:
    """``api.app.create_app``, imported when a command builds the app (as ``serve`` does)."""
    from api.app import create_app

    return create_app(settings)


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    """The arguments; an unknown option of a subcommand is that subcommand's usage error.

    argparse hands a subparser's unrecognized arguments up to the top-level parser, which
    would print the top-level usage for ``serve --prot 9999``.
    """
    args, unknown = build_parser().parse_known_args(argv)
    if unknown:
        args.command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand; a bad setting, an unopenable store or a bad input (an import's
    manifest or stage directory) is one line, not a trace."""
    args = parse_arguments(argv)
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
