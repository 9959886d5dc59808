"""The test suite (a package, so that pytest names its modules tests.api.test_x and not
api.test_x, which would shadow the product packages api, bench and pipeline)."""
