"""The bulk import under ``spark-submit`` (the master and resources come from spark-submit).

    spark-submit --master spark://spark-master:7077 pipeline/jobs/import_job.py \\
        INPUT --data-dir DIR | --server URL --stage-dir DIR --admin-key KEY [--replace] ...

Takes the arguments of ``timerstore import`` except ``--master``. The executors need the
``storage`` and ``pipeline`` packages and their dependencies (rocksdict, msgspec): the
worker image of docker-compose has them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pipeline.cli import add_import_arguments, run_import_command, run_job


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="import_job.py", description=__doc__)
    add_import_arguments(parser)
    parser.set_defaults(master=None)
    return run_job(run_import_command, parser.parse_args(argv), parser.prog)


if __name__ == "__main__":
    sys.exit(main())
