# The timerstore service (and the driver image of the one-shot import/analyze jobs).
# Java is here only for the PySpark driver of `timerstore import`; the service never starts it.
FROM python:3.11-slim-bookworm

RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/timerstore
COPY pyproject.toml requirements.lock README.md ./
COPY app ./app
COPY storage ./storage
COPY api ./api
COPY bench ./bench
COPY pipeline ./pipeline
RUN pip install --no-cache-dir -c requirements.lock .

ENV TIMERSTORE_HOST=0.0.0.0 \
    TIMERSTORE_PORT=8080 \
    TIMERSTORE_DATA_DIR=/data \
    PYSPARK_PYTHON=/usr/local/bin/python
VOLUME /data
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/readyz', timeout=2)"]
CMD ["timerstore", "serve"]
