"""``spark-submit`` entry points: the same jobs as ``timerstore import`` / ``analyze``."""
