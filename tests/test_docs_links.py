"""Every relative link in README.md and docs/*.md resolves: the file exists, and a `#fragment` names a heading of
the target page as GitHub renders it.

Markdown is parsed with markdown-it-py (installed with `rich`, a declared dependency), so links inside code
blocks and code spans are not links, and a heading's anchor is computed from its rendered text.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])

_PARSER = MarkdownIt("commonmark").enable("table")


@dataclass(frozen=True)
class BrokenLink:
    page: Path
    line: int  # 1-based line of the block holding the link
    href: str
    reason: str

    def __str__(self) -> str:
        return f"{_shown(self.page)}:{self.line}: {self.href} ({self.reason})"


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _plain_text(inline: Token) -> str:
    """A heading's rendered text: text and code spans, without markup."""
    return "".join(child.content for child in inline.children or () if child.type in ("text", "code_inline"))


def _slug(text: str) -> str:
    """GitHub's heading anchor: lower case, anything but letters, digits, spaces, hyphens and underscores
    dropped, each space a hyphen."""
    kept = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return kept.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the page's headings; a repeated heading gets -1, -2, … after the first."""
    tokens = _PARSER.parse(page.read_text(encoding="utf-8"))
    seen: Counter[str] = Counter()
    found: set[str] = set()
    for opening, inline in pairwise(tokens):
        if opening.type != "heading_open":
            continue
        slug = _slug(_plain_text(inline))
        found.add(slug if not seen[slug] else f"{slug}-{seen[slug]}")
        seen[slug] += 1
    return found


def _links(page: Path) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for block in _PARSER.parse(page.read_text(encoding="utf-8")):
        line = block.map[0] + 1 if block.map else 0
        for child in block.children or ():
            if child.type in ("link_open", "image"):
                href = child.attrGet("href") if child.type == "link_open" else child.attrGet("src")
                if isinstance(href, str):
                    out.append((line, href))
    return out


def broken_links(page: Path) -> list[BrokenLink]:
    """The page's relative links that do not resolve (external links are not fetched)."""
    broken: list[BrokenLink] = []
    for line, href in _links(page):
        parts = urlsplit(href)
        if parts.scheme or parts.netloc:
            continue
        target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
        if not target.exists():
            broken.append(BrokenLink(page, line, href, f"no file {_shown(target)}"))
            continue
        if parts.fragment and target.suffix == ".md" and unquote(parts.fragment) not in anchors(target):
            broken.append(BrokenLink(page, line, href, f"no heading with anchor #{parts.fragment} in {target.name}"))
    return broken


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_relative_link_resolves(page: Path) -> None:
    broken = broken_links(page)
    assert not broken, "broken links:\n" + "\n".join(map(str, broken))


def test_the_pages_hold_links_to_check() -> None:
    # guards the parser: README and the docs link to each other, so finding none means links went unseen
    assert len(PAGES) > 10
    assert sum(len(_links(page)) for page in PAGES) > 50


def test_a_missing_file_and_a_missing_heading_are_reported(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    target = tmp_path / "docs" / "target.md"
    target.write_text("# Target page\n\n## Reading without `FINAL`\n\n## Notes\n\n## Notes\n", encoding="utf-8")
    page = tmp_path / "docs" / "page.md"
    page.write_text(
        "See [ok](target.md#reading-without-final), [second notes](target.md#notes-1), [here](#local),\n"
        "[gone](missing.md), [bad anchor](target.md#no-such-heading), [web](https://example.com/x.md#y),\n"
        "and `[in code](missing-too.md)`.\n\n"
        "## Local\n\n```\n[in a block](missing-three.md)\n```\n",
        encoding="utf-8",
    )
    reported = {(b.href, b.reason.split(" ")[0]) for b in broken_links(page)}
    assert reported == {("missing.md", "no"), ("target.md#no-such-heading", "no")}
    assert anchors(target) == {"target-page", "reading-without-final", "notes", "notes-1"}
