"""Every relative link in README.md and docs/ resolves: the file exists and, for ``page.md#anchor``, the page has
a heading with that anchor (GitHub's rule: lower case, punctuation dropped, spaces to hyphens)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"(?<!!)\[(?:[^\]\\]|\\.)*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")


def markdown_pages(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def prose_lines(text: str, *, blank_code: bool = True) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks, with inline code spans blanked unless ``blank_code`` is
    false (headings keep theirs: the anchor is made of their text)."""
    out, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append((number, re.sub(r"`[^`]*`", "``", line) if blank_code else line))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in prose_lines(page.read_text(encoding="utf-8"), blank_code=False):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(page: Path) -> list[str]:
    """``"<line>: <target>: <why>"`` for each relative link of ``page`` that does not resolve."""
    broken = []
    text = page.read_text(encoding="utf-8")
    for number, line in prose_lines(text):
        for target in LINK.findall(line):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            path_part, _, anchor = target.partition("#")
            resolved = (page.parent / path_part).resolve() if path_part else page
            if not resolved.exists():
                broken.append(f"{number}: {target}: no such file")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                broken.append(f"{number}: {target}: no heading with that anchor")
    return broken


def test_every_relative_link_resolves() -> None:
    wrong = [f"{page.relative_to(ROOT)}:{problem}" for page in markdown_pages() for problem in broken_links(page)]
    assert not wrong, "broken links:\n" + "\n".join(wrong)


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Why SYNC_MASTER waited", "why-sync_master-waited"),
        ("W4: the consumer's pull path (issue 15)", "w4-the-consumers-pull-path-issue-15"),
        ("Side by side with NATS JetStream, Redis Streams and RabbitMQ",
         "side-by-side-with-nats-jetstream-redis-streams-and-rabbitmq"),
        ("SQL92 filters (`rmq-bench filter`)", "sql92-filters-rmq-bench-filter"),
        ("Sequential send latency (W3): where a lone send's time goes",
         "sequential-send-latency-w3-where-a-lone-sends-time-goes"),
    ],
)
def test_slug(heading: str, anchor: str) -> None:
    assert slug(heading) == anchor


def test_checker_finds_missing_pages_and_anchors(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A page\n\n## Some section\n", encoding="utf-8")
    page = tmp_path / "README.md"
    page.write_text(
        "[ok](docs/a.md) [ok](docs/a.md#some-section) [self](#top) [web](https://example.org/x)\n"
        "[gone](docs/b.md) [bad anchor](docs/a.md#other)\n"
        "```\n[in code](docs/c.md)\n```\n`[in a span](docs/d.md)`\n# Top\n",
        encoding="utf-8",
    )
    assert broken_links(page) == ["2: docs/b.md: no such file", "2: docs/a.md#other: no heading with that anchor"]
