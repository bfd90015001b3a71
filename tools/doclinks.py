"""Check that every relative link and anchor of the documentation resolves (``make check``).

Usage: ``python tools/doclinks.py README.md docs`` (files, or folders whose ``*.md`` are read).
Each Markdown file is parsed with markdown-it-py (CommonMark: a link inside a code block is text,
not a link), every link and image whose target is not a URL is resolved against the file's
folder: the file or folder must exist inside the repository, and an ``#anchor`` must name a
heading of the target Markdown file as GitHub renders it (lower case, punctuation dropped,
spaces to ``-``, a repeated heading suffixed ``-1``, ``-2``...). URLs (``https:``, ``mailto:``)
are not fetched: the check needs no network. Exit status 0 when everything resolves, 1 with one
line per broken link (``FILE:LINE: TARGET: why``), 2 on bad usage.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from markdown_it import MarkdownIt
from markdown_it.token import Token

ROOT = Path(__file__).resolve().parent.parent
"""The repository: no link may leave it."""
URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:|^//")
"""A target with a scheme (or protocol-relative): not checked."""
DROPPED = re.compile(r"[^\w\- ]", re.UNICODE)
"""What GitHub's heading slugs drop: everything but letters, digits, '_', '-' and spaces."""


@dataclass(frozen=True, slots=True)
class Link:
    """One link or image of a Markdown file."""

    line: int
    """1-based line of the block holding it."""
    target: str
    """The href or src as written."""


def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark").enable("table")


def _text(inline: Token) -> str:
    """A heading's text as rendered: its text and code spans, without markup."""
    return "".join(c.content for c in inline.children or () if c.type in ("text", "code_inline"))


def slug(text: str) -> str:
    """GitHub's anchor for a heading's text (before the duplicate suffix)."""
    return DROPPED.sub("", text.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading anchor of a Markdown document, duplicates suffixed as GitHub does."""
    tokens = _parser().parse(text)
    seen: dict[str, int] = {}
    out: set[str] = set()
    for i, token in enumerate(tokens):
        if token.type != "heading_open":
            continue
        base = slug(_text(tokens[i + 1]))
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    return out


def links(text: str) -> Iterator[Link]:
    """Every link and image target of a Markdown document, with its line."""
    for token in _parser().parse(text):
        if token.type != "inline" or not token.children:
            continue
        line = (token.map[0] + 1) if token.map else 0
        for child in token.children:
            if child.type == "link_open":
                yield Link(line, str(child.attrGet("href") or ""))
            elif child.type == "image":
                yield Link(line, str(child.attrGet("src") or ""))


def problem(source: Path, target: str, root: Path = ROOT) -> str | None:
    """Why ``target`` (written in ``source``) does not resolve, or None when it does."""
    if not target or URL.match(target):
        return None
    path_part, _, anchor = target.partition("#")
    resolved = (source.parent / path_part).resolve() if path_part else source.resolve()
    if not resolved.is_relative_to(root.resolve()):
        return "leaves the repository"
    if not resolved.exists():
        return "no such file"
    if (
        anchor
        and resolved.suffix == ".md"
        and anchor not in anchors(resolved.read_text(encoding="utf-8"))
    ):
        return f"no heading #{anchor} in {resolved.relative_to(root.resolve())}"
    return None


def markdown_files(paths: Sequence[Path]) -> list[Path]:
    """The files given, and the ``*.md`` of the folders given."""
    out: list[Path] = []
    for path in paths:
        out += sorted(path.glob("*.md")) if path.is_dir() else [path]
    return out


def check(paths: Sequence[Path], root: Path = ROOT) -> list[str]:
    """One line per broken link of the files (or folders) ``paths``."""
    broken = []
    for path in markdown_files(paths):
        for link in links(path.read_text(encoding="utf-8")):
            why = problem(path, link.target, root)
            if why is not None:
                broken.append(f"{path}:{link.line}: {link.target}: {why}")
    return broken


def main(argv: Sequence[str]) -> int:
    """Check the files or folders in ``argv``; returns the exit status."""
    if not argv:
        print("usage: python tools/doclinks.py FILE_OR_FOLDER...", file=sys.stderr)
        return 2
    missing = [a for a in argv if not Path(a).exists()]
    if missing:
        print(f"doclinks: {missing[0]}: no such file or folder", file=sys.stderr)
        return 2
    broken = check([Path(a) for a in argv])
    for line in broken:
        print(line, file=sys.stderr)
    return 1 if broken else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
