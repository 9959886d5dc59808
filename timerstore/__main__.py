"""``python -m timerstore``: the same as the ``timerstore`` console script."""

import sys

from timerstore.cli import main

sys.exit(main())
