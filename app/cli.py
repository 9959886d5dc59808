"""The ``timerstore`` console script: the composition root.

Subcommands live with the package they drive (``api.server``, ``bench.cli``,
``pipeline.cli``); each such module offers ``register(subparsers)``. They are imported
lazily by name so that ``app`` keeps no import-time dependency on the layers above it.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

COMMAND_MODULES = ("api.server", "bench.cli", "pipeline.cli")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="timerstore", description=__doc__)
    subparsers = parser.add_subparsers(dest="command", required=True)
    for module_name in COMMAND_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.handler(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
