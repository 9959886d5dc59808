# A Spark worker: a Spark image plus what the import's Python tasks import
# (storage.codec, storage.rocks.ingest's SST options, pipeline) and need
# (rocksdict, msgspec, pyarrow). Executors must run the driver's Python minor version (3.11),
# at the driver's path (/opt/venv/bin/python).
#
# SPARK_IMAGE is the official image for users with a registry; docker/build-offline.sh passes
# timerstore:latest instead (Spark from PySpark's package, Debian's Python 3.11 and Java 17,
# /opt/venv already made), so nothing here needs the network then. Wheels come from
# docker/wheelhouse (docker/build-offline.sh wheelhouse).
ARG SPARK_IMAGE=apache/spark:4.3.0-scala2.13-java17-python3-ubuntu
FROM ${SPARK_IMAGE}

USER root
COPY docker/wheelhouse/rocksdict-* docker/wheelhouse/msgspec-* docker/wheelhouse/pyarrow-* /tmp/wheels/
RUN if [ ! -x /opt/venv/bin/python ]; then \
        apt-get update \
        && apt-get install -y --no-install-recommends python3.11 python3.11-venv \
        && rm -rf /var/lib/apt/lists/* \
        && python3.11 -m venv /opt/venv; \
    fi \
    && /opt/venv/bin/pip install --no-cache-dir --no-index --find-links /tmp/wheels \
        rocksdict==0.3.29 msgspec==0.22.0 pyarrow==26.0.1 \
    && rm -rf /tmp/wheels
COPY storage /opt/timerstore/storage
COPY pipeline /opt/timerstore/pipeline
ENV PYSPARK_PYTHON=/opt/venv/bin/python \
    PYTHONPATH=/opt/timerstore
# Stays root: executors write SST files into the shared staging volume, whose directories
# the (root) driver and service create.
