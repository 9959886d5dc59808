"""The delivery analytics under ``spark-submit``.

    spark-submit --master spark://spark-master:7077 pipeline/jobs/analyze_job.py \\
        DELIVERIES --out REPORT_DIR
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pipeline.cli import add_conf_argument, run_analyze_command, run_job


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="analyze_job.py", description=__doc__)
    parser.add_argument("deliveries", help="delivery history (Parquet)")
    parser.add_argument("--out", required=True, help="report directory")
    add_conf_argument(parser)
    parser.set_defaults(master=None)
    return run_job(run_analyze_command, parser.parse_args(argv), parser.prog)


if __name__ == "__main__":
    sys.exit(main())
