# A Spark worker: the official Apache Spark image plus what the import's Python tasks
# import (storage.codec, storage.rocks.ingest's SST options, pipeline) and need
# (rocksdict, msgspec). Executors must run the driver's Python minor version (3.11).
ARG SPARK_IMAGE=apache/spark:4.3.0-scala2.13-java17-python3-ubuntu
FROM ${SPARK_IMAGE}

USER root
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3.11 python3.11-venv \
    && rm -rf /var/lib/apt/lists/* \
    && python3.11 -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir rocksdict==0.3.29 msgspec==0.22.0 pyarrow==26.0.1
COPY storage /opt/timerstore/storage
COPY pipeline /opt/timerstore/pipeline
ENV PYSPARK_PYTHON=/opt/venv/bin/python \
    PYTHONPATH=/opt/timerstore
# Stays root: executors write SST files into the shared staging volume, whose directories
# the (root) driver and service create.
