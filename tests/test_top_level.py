"""The one import name: the SDK's public names import from ``pocketmq`` itself, lazily."""

from __future__ import annotations

import subprocess
import sys

import pocketmq
import pocketmq.client


def test_the_top_offers_exactly_the_sdk_names() -> None:
    assert set(pocketmq.__all__) == set(pocketmq.client.__all__)
    for name in pocketmq.__all__:
        assert getattr(pocketmq, name) is getattr(pocketmq.client, name)


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        pocketmq.NoSuchThing  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("pocketmq.NoSuchThing resolved")


def test_importing_the_store_does_not_load_the_sdk() -> None:
    code = "import sys, pocketmq.store; print('pocketmq.client' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "False"


def test_the_version_is_the_installed_one_and_read_only_when_asked() -> None:
    from importlib.metadata import version

    assert pocketmq.__version__ == version("pocketmq")
    code = "import sys, pocketmq.store; print('importlib.metadata' in sys.modules, pocketmq.__version__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["False", version("pocketmq")]
