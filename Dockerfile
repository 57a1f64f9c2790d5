# PocketMQ image: every process (rmq-namesrv, rmq-broker, rmq-admin, rmq-cluster, rmq-console...) from one image.
#
# BASE_IMAGE is what the image runs on; BUILDER_IMAGE (default: the same) installs the project into a virtual
# environment that is then copied over alone, so no pip, build dependency or download cache is left in the image.
# The slim default has no C compiler and installs plain Python; a builder with one and the Python headers
# (--build-arg BUILDER_IMAGE=python:3.11) compiles the hot path. Both must carry the same Python at the same path.
# docs/docker.md says how to build, run and test it.
ARG BASE_IMAGE=python:3.11-slim
ARG BUILDER_IMAGE=${BASE_IMAGE}

FROM ${BUILDER_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY pyproject.toml setup.py MANIFEST.in README.md LICENSE ./
COPY pocketmq ./pocketmq
RUN python -m venv /opt/pocketmq/venv \
    && /opt/pocketmq/venv/bin/python -m pip install . \
    && /opt/pocketmq/venv/bin/python -m pip uninstall --yes pip setuptools

FROM ${BASE_IMAGE}
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PATH=/opt/pocketmq/venv/bin:$PATH
COPY --from=build /opt/pocketmq/venv /opt/pocketmq/venv
# /opt/pocketmq/conf: the presets (conf/<preset>/<broker>.properties) at a fixed path for -c.
RUN ln -s "$(python -c 'from pocketmq.conf import presets_dir; print(presets_dir())')" /opt/pocketmq/conf \
    && groupadd --system --gid 10001 pocketmq \
    && useradd --system --uid 10001 --gid pocketmq --home-dir /data --no-create-home pocketmq \
    && mkdir -p /data && chown pocketmq:pocketmq /data

USER 10001:10001
WORKDIR /data
# Named volumes start as a copy of this directory, owned by the pocketmq user.
VOLUME ["/data"]
# Name server, broker listen port (see conf/ for each preset broker's own port; docker-compose.yml publishes them).
EXPOSE 9876 10911
CMD ["rmq-namesrv", "--port", "9876", "--kv-config-path", "/data/kvConfig.json"]
