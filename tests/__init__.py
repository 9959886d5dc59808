"""The test suite (a package, so that tests/api is ``tests.api`` and never shadows ``api``)."""
