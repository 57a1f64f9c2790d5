"""Presets, Dockerfile and docker-compose.yml checked against each other (no Docker engine needed)."""

from __future__ import annotations

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
    services = _compose()["services"]
    assert set(services) == {"namesrv-0", "namesrv-1", *LAYOUTS["2m-2s-sync"]}
    namesrv_ports = []
    for name in ("namesrv-0", "namesrv-1"):
        svc = services[name]
        cmd = svc["command"]
        assert cmd[0] == "rmq-namesrv"
        port = int(cmd[cmd.index("--port") + 1])
        namesrv_ports.append(port)
        assert f"{port}:{port}" in svc["ports"]
        assert svc["healthcheck"]["test"] and svc["restart"] == "unless-stopped"
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
        assert "--broker-ip" in cmd and "ADVERTISED_HOST" in cmd[cmd.index("--broker-ip") + 1]
        assert cmd[cmd.index("--store-dir") + 1] == "/data"
        published = {p.split(":")[0] for p in svc["ports"]}
        assert str(config.listen_port) in published
        if broker_id == 0:
            assert str(config.listen_port + 1) in published  # HA port, for slaves through the advertised address
            assert set(svc["depends_on"]) == {"namesrv-0", "namesrv-1"}
        else:
            assert svc["depends_on"] == {broker_name: {"condition": "service_healthy"}}
        assert str(config.listen_port) in " ".join(svc["healthcheck"]["test"])
        assert svc["restart"] == "unless-stopped"
        [volume] = svc["volumes"]
        assert volume.endswith(":/data")
        volumes.add(volume.split(":")[0])
    assert len(volumes) == 4
    assert volumes | {"namesrv-0", "namesrv-1"} == set(_compose()["volumes"])


def test_dockerfile_installs_the_project_like_the_makefile() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    makefile = (ROOT / "Makefile").read_text()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    copied = set(re.findall(r"^COPY (\S+) ", dockerfile, re.M))
    # every package the distribution includes is copied into the image
    for pattern in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]:
        assert pattern.split(".")[0] in copied, pattern
    assert "pyproject.toml" in copied
    # every console script's package is part of the distribution
    includes = {p.rstrip("*") for p in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]}
    for target in pyproject["project"]["scripts"].values():
        assert target.split(".")[0] in includes, target
    # the same install command as the Makefile (python -m pip install <project>), without the dev extra
    assert re.search(r"python -m pip install -e '\.\[dev[a-z,]*\]'", makefile)
    assert re.search(r"^RUN python -m pip install .*python -m pip install \. ", dockerfile, re.M)
    assert re.search(r"requires-python = \">=3\.11\"", (ROOT / "pyproject.toml").read_text())
    assert dockerfile.startswith("#") and "FROM python:3.11" in dockerfile
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert ".venv" in ignored and ".git" in ignored


def test_the_files_the_image_copies_build_a_complete_distribution(tmp_path: Path) -> None:
    """The image's install step, minus Docker: stage exactly what the Dockerfile copies and build the wheel
    from it, as ``pip install .`` does inside the image; every package and console script must be in it."""
    stage = tmp_path / "stage"
    stage.mkdir()
    for source, _dest in re.findall(r"^COPY (.+) (\S+)$", (ROOT / "Dockerfile").read_text(), re.M):
        for name in source.split():
            path = ROOT / name
            if path.is_dir():
                shutil.copytree(path, stage / name, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(path, stage / name)
    out = tmp_path / "wheel"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out),
                    str(stage)], check=True, timeout=180, capture_output=True)
    (wheel,) = out.glob("pocketmq-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        entry_points = next(archive.read(n).decode() for n in names if n.endswith("entry_points.txt"))
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    for pattern in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]:
        assert f"{pattern.rstrip('.*').replace('.', '/')}/__init__.py" in names, pattern
    for script, target in pyproject["project"]["scripts"].items():
        assert f"{script} = {target}" in entry_points
        module = target.split(":")[0].replace(".", "/") + ".py"
        assert module in names, module
