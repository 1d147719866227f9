# cronjobs: the `cronjobs` executable in a small image that runs as a non-root user.
#
#   docker build -t cronjobs:0.1.0 .
#   docker run --rm -e CRONJOBS_DATABASE_URL=postgresql://USER:PASSWORD@HOST:5432/DB cronjobs:0.1.0
#
# The default command is one `cronjobs tick`; any other command is given as arguments
# (`docker run … cronjobs:0.1.0 migrate`). The embedded PostgreSQL is not installed: the image
# always talks to a real server named by CRONJOBS_DATABASE_URL (or DATABASE_URL, or PG*).
# Handlers (`@cronjobs.job`) must be importable: build your own image FROM this one, install
# your application into it, and set CRONJOBS_APP. deploy/kubernetes/ runs it as a CronJob.

# --- build: the cronjobs wheel and the wheels of its dependencies -------------------------
FROM python:3.12-slim AS build

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1

WORKDIR /src
# cronjobs/db/schema.sql is a link to the top-level schema.sql: both are copied.
COPY pyproject.toml README.md schema.sql ./
COPY cronjobs ./cronjobs
# With the web extra (`cronjobs serve`, the dashboard): one image for every pod. The tick
# never imports it, so its start-up is the same.
RUN pip wheel --no-cache-dir --wheel-dir /wheels ".[web]"

# --- runtime -----------------------------------------------------------------------------
FROM python:3.12-slim

LABEL org.opencontainers.image.title="cronjobs" \
      org.opencontainers.image.description="Cron-triggered scheduled jobs kept in PostgreSQL" \
      org.opencontainers.image.licenses="MIT"

# No .pyc written at run time (the root filesystem is read-only in Kubernetes; pip compiles
# the installed modules once, below), logs straight to the container's output, no pip cache.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1

# The wheels are mounted from the build stage, not copied: they leave no layer behind
# (RUN --mount needs BuildKit, the default builder since Docker 23).
# --no-index: everything comes from the build stage's wheels, nothing from the network.
# "cronjobs[web]" is the wheel above with its extra (--no-index: nothing else can be found).
# hadolint ignore=DL3013
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links=/wheels --compile \
       /wheels/cronjobs-*.whl "cronjobs[web]" \
    && groupadd --system --gid 10001 cronjobs \
    && useradd --system --uid 10001 --gid 10001 --home-dir /tmp --no-create-home \
       --shell /usr/sbin/nologin cronjobs

# Jobs run in the working directory; /tmp is the writable scratch space (an emptyDir in
# Kubernetes), and HOME points there for tools that want one.
ENV HOME=/tmp
WORKDIR /tmp

USER 10001:10001

# Exec form: cronjobs is PID 1 and receives SIGTERM itself, stops claiming, gives running
# jobs --grace to finish and puts the interrupted ones back in the queue.
ENTRYPOINT ["cronjobs"]
CMD ["tick"]
