"""The composition root: the ``timerstore`` console script, above every other layer."""
