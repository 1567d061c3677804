# scalewatch server image: API + dashboard + background workers in one process (or several,
# with SCALEWATCH_WORKERS_PROCESSES / --workers), PostgreSQL as the database.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    SCALEWATCH_HOME=/data \
    SCALEWATCH_HOST=0.0.0.0 \
    SCALEWATCH_PORT=8765

WORKDIR /app
COPY pyproject.toml README.md ./
COPY trainer_client ./trainer_client
COPY server ./server
COPY dashboard ./dashboard
COPY migrations ./migrations
RUN pip install --no-cache-dir '.[server]' \
    && useradd --system --home /data scalewatch \
    && mkdir -p /data && chown scalewatch /data
USER scalewatch
VOLUME ["/data"]
EXPOSE 8765

HEALTHCHECK --interval=10s --timeout=3s --retries=5 \
  CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8765/readyz', timeout=2).status == 200 else 1)"

# Migrations are applied explicitly before serving: a server database is never upgraded
# implicitly by `serve`, which refuses an out-of-date schema.
CMD ["sh", "-c", "scalewatch db upgrade && exec scalewatch serve --workers ${SCALEWATCH_PROCESSES:-2}"]
