# The timerstore service (and the driver image of the one-shot import/analyze jobs).
# Java is here only for the PySpark driver of `timerstore import`; the service never starts it.
#
# Python dependencies come from a wheelhouse in docker/wheelhouse (ignored by git), so the
# build itself needs no package index:
#   docker/build-offline.sh wheelhouse      # pip wheel from requirements.lock, on the host
#   docker compose build                    # FROM python:3.11-slim-bookworm (a registry)
# With no registry, docker/build-offline.sh builds a local Debian base with Python 3.11 and
# Java 17 and passes it as BASE_IMAGE (docker-compose.offline.yml).
ARG BASE_IMAGE=python:3.11-slim-bookworm

# The dependencies: every wheel of the wheelhouse (the runtime set of requirements.lock and
# the build backend), in a stage of their own so that the wheels stay out of the image and
# a change of the code does not reinstall them.
FROM ${BASE_IMAGE} AS deps
COPY docker/wheelhouse /wheels
RUN python3.11 -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir --no-index /wheels/*.whl

FROM ${BASE_IMAGE}
# The local base has Java 17 already (and no network); the registry base gets it from apt.
RUN if ! command -v java >/dev/null 2>&1; then \
        apt-get update \
        && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
        && rm -rf /var/lib/apt/lists/*; \
    fi
COPY --from=deps /opt/venv /opt/venv
# PySpark's package is a whole Spark (bin/, sbin/, jars/): /opt/spark lets the offline
# compose run the standalone master from this image (the registry path uses apache/spark).
RUN ln -s /opt/venv/lib/python3.11/site-packages/pyspark /opt/spark

COPY pyproject.toml requirements.lock README.md /src/
COPY app /src/app
COPY cluster /src/cluster
COPY storage /src/storage
COPY api /src/api
COPY bench /src/bench
COPY pipeline /src/pipeline
COPY timerstore /src/timerstore
COPY client /src/client
RUN /opt/venv/bin/pip install --no-cache-dir --no-index --no-deps --no-build-isolation /src \
    && rm -rf /src

WORKDIR /opt/timerstore
ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 \
    SPARK_HOME=/opt/spark \
    TIMERSTORE_HOST=0.0.0.0 \
    TIMERSTORE_PORT=8080 \
    TIMERSTORE_DATA_DIR=/data \
    PYSPARK_PYTHON=/opt/venv/bin/python
VOLUME /data
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/readyz', timeout=2)"]
CMD ["timerstore", "serve"]
