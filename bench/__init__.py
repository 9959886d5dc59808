"""The comparison benchmark: RocksDB store vs RIP-43 time wheel vs what users pick instead.

``timerstore bench`` (see ``bench.cli``) runs the scenarios of ``bench.scenarios`` against
the systems of ``bench.systems`` and writes ``bench/results/<UTC timestamp>/``.
Nothing runs at import time.
"""
