"""Presets, Dockerfile and docker-compose.yml checked against each other (no Docker engine needed)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest

from pocketmq.broker.config import BrokerRole, load_broker_config
from pocketmq.common.config import load_properties
from pocketmq.conf import presets_dir

ROOT = Path(__file__).resolve().parents[2]
CONF = presets_dir()
LAYOUTS = {
    "2m-2s-sync": {"broker-a": ("broker-a", 0, "SYNC_MASTER"), "broker-a-s": ("broker-a", 1, "SLAVE"),
                   "broker-b": ("broker-b", 0, "SYNC_MASTER"), "broker-b-s": ("broker-b", 1, "SLAVE")},
    "2m-2s-async": {"broker-a": ("broker-a", 0, "ASYNC_MASTER"), "broker-a-s": ("broker-a", 1, "SLAVE"),
                    "broker-b": ("broker-b", 0, "ASYNC_MASTER"), "broker-b-s": ("broker-b", 1, "SLAVE")},
    "2m-noslave": {"broker-a": ("broker-a", 0, "ASYNC_MASTER"), "broker-b": ("broker-b", 0, "ASYNC_MASTER")},
}


@pytest.mark.parametrize("preset", sorted(LAYOUTS))
def test_presets_match_the_seed_layouts_and_load(preset: str) -> None:
    files = {p.stem: p for p in (CONF / preset).glob("*.properties")}
    assert set(files) == set(LAYOUTS[preset])
    ports: set[int] = set()
    stores: set[str] = set()
    for stem, path in files.items():
        config = load_broker_config(load_properties(path))  # unknown keys would raise
        name, broker_id, role = LAYOUTS[preset][stem]
        assert (config.broker_cluster_name, config.broker_name, config.broker_id, config.broker_role.name) == (
            "DefaultCluster", name, broker_id, role)
        used = {config.listen_port}
        if config.broker_role is not BrokerRole.SLAVE:
            used.add(config.listen_port + 1)  # the HA port
        assert not used & ports, f"{path} reuses a port"
        ports |= used
        assert config.store.store_path_root_dir not in stores
        stores.add(config.store.store_path_root_dir)
        assert not {9876, 9877} & used


def _compose() -> dict[str, Any]:
    yaml = pytest.importorskip("yaml")
    data = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(data, dict)
    return data


def test_compose_runs_two_namesrvs_and_the_2m_2s_sync_preset() -> None:
    """What tests/docker runs on a real engine, checked where none runs: the services, ports, volumes, health
    checks and the advertised addresses (each broker its service name by default, ADVERTISED_HOST when set; the
    HA address always the service name, and the HA port not published)."""
    compose = _compose()
    services = compose["services"]
    assert set(services) == {"namesrv-0", "namesrv-1", *LAYOUTS["2m-2s-sync"]}
    namesrv_ports = []
    for name in ("namesrv-0", "namesrv-1"):
        svc = services[name]
        cmd = svc["command"]
        assert cmd[0] == "rmq-namesrv"
        port = int(cmd[cmd.index("--port") + 1])
        namesrv_ports.append(port)
        assert svc["ports"] == [f"{port}:{port}"]
        assert svc["healthcheck"]["test"] == ["CMD", "python", "-m", "pocketmq.admin.health", f"127.0.0.1:{port}"]
        assert svc["restart"] == "unless-stopped"
        assert any(v.endswith(":/data") for v in svc["volumes"])
    expected_namesrv = ";".join(f"namesrv-{i}:{p}" for i, p in enumerate(namesrv_ports))
    volumes = set()
    for stem, (broker_name, broker_id, _role) in LAYOUTS["2m-2s-sync"].items():
        svc = services[stem]
        cmd = svc["command"]
        assert cmd[0] == "rmq-broker"
        conf = cmd[cmd.index("-c") + 1]
        assert conf == f"/opt/pocketmq/conf/2m-2s-sync/{stem}.properties"
        config = load_broker_config(load_properties(CONF / "2m-2s-sync" / f"{stem}.properties"))
        assert cmd[cmd.index("-n") + 1] == expected_namesrv
        assert cmd[cmd.index("--broker-ip") + 1] == f"${{ADVERTISED_HOST:-{stem}}}"
        assert cmd[cmd.index("--broker-ip2") + 1] == stem
        assert cmd[cmd.index("--store-dir") + 1] == "/data"
        # clients come in on the listen port; slaves reach a master's HA port on the Compose network only
        assert svc["ports"] == [f"{config.listen_port}:{config.listen_port}"]
        if broker_id == 0:
            assert set(svc["depends_on"]) == {"namesrv-0", "namesrv-1"}
        else:
            assert svc["depends_on"] == {broker_name: {"condition": "service_healthy"}}
        assert svc["healthcheck"]["test"] == ["CMD", "python", "-m", "pocketmq.admin.health", "--broker",
                                              f"127.0.0.1:{config.listen_port}"]
        assert svc["restart"] == "unless-stopped" and "extra_hosts" not in svc
        [volume] = svc["volumes"]
        assert volume.endswith(":/data")
        volumes.add(volume.split(":")[0])
    assert len(volumes) == 4
    assert volumes | {"namesrv-0", "namesrv-1"} == set(compose["volumes"])


def test_a_brokers_default_advertised_name_is_what_its_service_resolves_to() -> None:
    """The default ``--broker-ip`` is the service's own name, which Compose's DNS resolves to the container:
    loading it needs no engine, only that a name is accepted and resolved (here: localhost)."""
    config = load_broker_config(load_properties(CONF / "2m-2s-sync" / "broker-a.properties"),
                                broker_ip1="localhost", broker_ip2="localhost")
    assert config.broker_ip1 in ("127.0.0.1", "::1")


def test_dockerfile_builds_a_non_root_image_on_any_base() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert dockerfile.startswith("#")
    assert re.search(r"^ARG BASE_IMAGE=python:3\.11-slim$", dockerfile, re.M)
    assert re.search(r"^ARG BUILDER_IMAGE=\$\{BASE_IMAGE\}$", dockerfile, re.M)
    stages = re.findall(r"^FROM (\S+)", dockerfile, re.M)
    assert stages == ["${BUILDER_IMAGE}", "${BASE_IMAGE}"]
    assert re.search(r"requires-python = \">=3\.11\"", (ROOT / "pyproject.toml").read_text())
    copied = set(re.findall(r"^COPY (?!--from)(\S+) ", dockerfile, re.M))
    for pattern in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]:
        assert pattern.split(".")[0] in copied, pattern
    assert "pyproject.toml" in copied
    # every console script's package is part of the distribution
    includes = {p.rstrip("*") for p in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]}
    for target in pyproject["project"]["scripts"].values():
        assert target.split(".")[0] in includes, target
    # the project itself, without the dev extra, into the environment the final stage copies and puts first on PATH
    assert re.search(r"/opt/pocketmq/venv/bin/python -m pip install \. ", dockerfile)
    assert "COPY --from=build /opt/pocketmq/venv /opt/pocketmq/venv" in dockerfile
    assert re.search(r"^ENV .*PATH=/opt/pocketmq/venv/bin:\$PATH", dockerfile, re.M)
    final = dockerfile[dockerfile.rindex("FROM "):]
    [user] = re.findall(r"^USER (\S+)$", final, re.M)
    assert user.split(":")[0] not in ("0", "root")
    assert re.search(r'^VOLUME \["/data"\]$', final, re.M)
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".venv", ".git", ".cache", "**/*.so"} <= set(ignored)


def test_the_files_the_image_copies_build_a_complete_distribution(tmp_path: Path) -> None:
    """The image's install step, minus Docker: stage exactly what the Dockerfile copies (less what
    .dockerignore leaves out) and build the wheel from it, as ``pip install .`` does inside an image without a
    compiler; every package and console script must be in it, and no extension built on this machine."""
    stage = tmp_path / "stage"
    stage.mkdir()
    for source, _dest in re.findall(r"^COPY (?!--from)(.+) (\S+)$", (ROOT / "Dockerfile").read_text(), re.M):
        for name in source.split():
            path = ROOT / name
            if path.is_dir():
                shutil.copytree(path, stage / name, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
            else:
                shutil.copy2(path, stage / name)
    out = tmp_path / "wheel"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out),
                    str(stage)], check=True, timeout=180, capture_output=True,
                   env={**os.environ, "POCKETMQ_PURE_PYTHON": "1"})
    (wheel,) = out.glob("pocketmq-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        entry_points = next(archive.read(n).decode() for n in names if n.endswith("entry_points.txt"))
    assert not [n for n in names if n.endswith(".so")]
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    for pattern in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]:
        assert f"{pattern.rstrip('.*').replace('.', '/')}/__init__.py" in names, pattern
    for script, target in pyproject["project"]["scripts"].items():
        assert f"{script} = {target}" in entry_points
        module = target.split(":")[0].replace(".", "/") + ".py"
        assert module in names, module
