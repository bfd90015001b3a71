"""The documentation's link check (``tools/doclinks.py``, run by ``make check``): every relative
link and anchor of README.md and docs/*.md resolves, and a broken one is named with its line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from repo_paths import ROOT

from tools.doclinks import anchors, check, slug


def test_the_repository_documentation_resolves() -> None:
    assert check([ROOT / "README.md", ROOT / "docs"]) == []
    readme = (ROOT / "README.md").read_text()
    # what a newcomer needs: the two commands (.ci/run runs `make test`), the screenshot, links
    assert "make demo" in readme and "make test" in readme
    assert "(docs/console-demo.svg)" in readme and (ROOT / "docs" / "console-demo.svg").is_file()
    assert len(readme.encode()) < 8_000, "the README is an entry point; the reference is docs/"


def test_slugs_are_githubs() -> None:
    assert slug("SGLang version: pinned to 0.5.23") == "sglang-version-pinned-to-0523"
    assert (
        slug("Rollout and rollback: the fleet verdict") == "rollout-and-rollback-the-fleet-verdict"
    )
    text = "# `gpufleet status`\n\n## Exit\n\n## Exit\n\n```\n# not a heading\n```\n"
    assert anchors(text) == {"gpufleet-status", "exit", "exit-1"}


def test_broken_links_are_named_with_their_line(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "other.md").write_text("# Other\n\n## A part\n")
    page = tmp_path / "docs" / "page.md"
    page.write_text(
        "# Page\n\n"
        "[fine](other.md#a-part) [fine too](#page) [web](https://example.invalid/x#y)\n\n"
        "[gone](missing.md)\n\n"
        "[no such part](other.md#b-part)\n\n"
        "![picture](shot.svg)\n\n"
        "[here](#nowhere)\n\n"
        "[out](../../outside.md)\n\n"
        "```\n[in a code block](not-checked.md)\n```\n"
    )
    broken = check([tmp_path / "docs"], root=tmp_path)
    assert broken == [
        f"{page}:5: missing.md: no such file",
        f"{page}:7: other.md#b-part: no heading #b-part in docs/other.md",
        f"{page}:9: shot.svg: no such file",
        f"{page}:11: #nowhere: no heading #nowhere in docs/page.md",
        f"{page}:13: ../../outside.md: leaves the repository",
    ]


def test_the_command_exits_1_on_a_broken_link_and_0_on_the_docs(tmp_path: Path) -> None:
    bad = tmp_path / "bad.md"
    bad.write_text("[gone](nowhere.md)\n")
    tool = [sys.executable, str(ROOT / "tools" / "doclinks.py")]
    done = subprocess.run([*tool, str(bad)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "nowhere.md: " in done.stderr
    done = subprocess.run(
        [*tool, "README.md", "docs"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert subprocess.run(tool, capture_output=True, timeout=60).returncode == 2
