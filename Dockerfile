# PocketMQ image: every process of the cluster (rmq-namesrv, rmq-broker, rmq-admin, rmq-cluster) from one image.
# The install step is the Makefile's (python -m pip install of the project), without the dev extra; setup.py builds
# the compiled hot path where the image has a C compiler and Cython, and installs plain Python where not.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /opt/pocketmq

COPY pyproject.toml setup.py MANIFEST.in README.md ./
COPY pocketmq ./pocketmq
RUN python -m pip install --upgrade pip && python -m pip install . \
    && ln -s "$(python -c 'from pocketmq.conf import presets_dir; print(presets_dir())')" /opt/pocketmq/conf \
    && useradd --system --uid 10001 --home-dir /data pocketmq && mkdir -p /data && chown pocketmq /data

USER pocketmq
VOLUME ["/data"]
# name server, broker listen port, master HA port (see conf/ for the per-broker ports of a preset)
EXPOSE 9876 10911 10912
CMD ["rmq-namesrv", "--port", "9876"]
