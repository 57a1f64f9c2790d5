"""The vendored browser libraries are the release files VENDORED.md names (same hashes), ship as package data, and
every page's assets are local: no CDN address anywhere in the templates or scripts."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pocketmq.console

PACKAGE = Path(pocketmq.console.__file__).parent
VENDOR = PACKAGE / "static" / "vendor"


def test_vendored_files_match_the_recorded_hashes_and_licences() -> None:
    table = (VENDOR / "VENDORED.md").read_text()
    rows = re.findall(r"\| `([^`]+)` \| `([^`]+)` \| ([0-9.]+) \| [^|]+\| `([0-9a-f]{64})` \|", table)
    assert {r[0] for r in rows} == {"htmx.min.js", "uPlot.iife.min.js", "uPlot.min.css"}
    for name, _package, _version, digest in rows:
        assert hashlib.sha256((VENDOR / name).read_bytes()).hexdigest() == digest, name
    assert "Zero-Clause BSD" in (VENDOR / "LICENSE.htmx").read_text()
    assert "MIT License" in (VENDOR / "LICENSE.uPlot").read_text()


def test_no_page_loads_anything_from_elsewhere() -> None:
    static = PACKAGE / "static"
    static = PACKAGE / "static"
    for path in [*(PACKAGE / "templates").glob("*.html"), static / "app.js", static / "app.css"]:
        text = path.read_text()
        assert not re.search(r"(src|href)=\"(https?:)?//", text), path
        assert "<script>" not in text and " on" + "click=" not in text, path  # no inline script: the CSP forbids it
