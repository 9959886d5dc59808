"""The data pipeline on Spark: bulk import through SST files and delivery analytics.

It imports only ``storage`` (the codec, and ``storage.rocks.ingest`` for the staged-file
format). PySpark is imported inside functions, never at import time.
"""
