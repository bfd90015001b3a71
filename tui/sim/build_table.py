"""Which SGLang flag table the simulator parses a build's command line with.

A ``--sim-build`` imitates one SGLang release, so its command line is that release's: 0.5.17 still
takes ``--cuda-graph-max-bs`` (deprecated there, refused by 0.5.23). The build is known before
the parser is (``--sim-build`` is one of its own flags), so it is read from the argv first.
Where the release's table is not shipped (``tui.sglang.flagtable``), the pinned 0.5.23 table is
used.
"""

from __future__ import annotations

from tui.sglang.builds import SGLANG_0_5_17
from tui.sglang.flagtable.table import PINNED_VERSION, known_versions


def table_version(build: str | None) -> str:
    """The SGLang release whose flag table parses ``build``'s command line (the build's own
    when shipped, else the pinned one)."""
    if build == SGLANG_0_5_17 and SGLANG_0_5_17 in known_versions():
        return SGLANG_0_5_17
    return PINNED_VERSION
