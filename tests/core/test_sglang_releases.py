"""Every claim of ``tui.sglang.releases`` against the source of every release it covers.

The source is each release's own wheel, as PyPI serves it
(``tests/helpers/flagtable_helpers.py``), read as a zip: a few files per release, nothing
installed or imported.
"""

from __future__ import annotations

import dataclasses
import zipfile
from collections.abc import Callable, Iterator

import pytest
from flagtable_helpers import ensure_reference
from repo_paths import ROOT

from tui.servers.histogram import LATENCY_FAMILIES
from tui.servers.payloads import METRIC_NAMES
from tui.sglang import releases, releases_doc
from tui.sglang.flagtable.reference import RELEASES, wheel_path
from tui.sglang.flagtable.table import known_versions

Reader = Callable[[str, str], str | None]


@pytest.fixture(scope="module")
def source() -> Iterator[Reader]:
    """(release, path in the wheel) -> the file's text, or None when the release has no such
    file (each file read once)."""
    root = ensure_reference(*RELEASES)
    wheels = {v: zipfile.ZipFile(wheel_path(v, root)) for v in RELEASES}
    texts: dict[tuple[str, str], str | None] = {}

    def read(version: str, path: str) -> str | None:
        if (version, path) not in texts:
            try:
                texts[version, path] = wheels[version].read(path).decode()
            except KeyError:
                texts[version, path] = None
        return texts[version, path]

    yield read
    for wheel in wheels.values():
        wheel.close()


@pytest.mark.parametrize("claim", releases.CLAIMS, ids=lambda c: c.name)
def test_each_claim_is_in_exactly_the_releases_it_names(
    claim: releases.Claim, source: Reader
) -> None:
    found = {
        v: any(claim.found_in(text) for p in claim.sources if (text := source(v, p)) is not None)
        for v in RELEASES
    }
    assert found == {v: claim.holds(v) for v in RELEASES}


def test_the_claims_are_the_release_record() -> None:
    names = [c.name for c in releases.CLAIMS]
    assert names == [f.name for f in dataclasses.fields(releases.Release)][1:]
    assert len(set(names)) == len(names)
    for claim in releases.CLAIMS:
        assert any(claim.holds(v) for v in known_versions()), claim.name  # not an empty range
        assert all(len(p) >= 15 for p in claim.evidence), claim.name  # nothing matches anything
    # The metric families the console reads are the ones claimed for every release.
    metrics = next(c for c in releases.CLAIMS if c.name == "console_metrics")
    assert {e.removeprefix('name="').removesuffix('"') for e in metrics.evidence} == set(
        METRIC_NAMES
    ) | set(LATENCY_FAMILIES)


def test_what_0_5_17_lacks_and_0_5_23_has() -> None:
    old, new = releases.release("0.5.17"), releases.release("0.5.23")
    assert not old.ready_endpoint and new.ready_endpoint
    assert old.health_generates and new.health_generates  # /health is no cheap fallback
    assert old.get_load_endpoint and not new.get_load_endpoint
    assert old.graph_begin_bs and not old.graph_end_bs
    assert new.graph_end_bs and not new.graph_begin_bs
    assert old.kv_line_dtype and not old.kv_line_va_upper_bound
    assert old.cap_warning and old.mamba_line and old.decode_line and old.console_metrics
    assert releases.has("0.5.20", "ready_endpoint") and not releases.has("0.5.19", "ready_endpoint")
    with pytest.raises(releases.UnknownRelease, match=r"0\.5\.16"):
        releases.release("0.5.16")
    with pytest.raises(KeyError):
        releases.has("0.5.17", "no_such_claim")


def test_aliases_come_from_each_release_table() -> None:
    old = releases.aliases("0.5.17")
    assert old["--cuda-graph-max-bs"] == "--cuda-graph-max-bs-decode"
    assert old["--mamba-scheduler-strategy"] == "--mamba-radix-cache-strategy"
    assert "--cuda-graph-max-bs" in releases.aliases("0.5.19")
    for version in ("0.5.20", "0.5.23"):
        assert "--cuda-graph-max-bs" not in releases.aliases(version)
        assert "--mamba-scheduler-strategy" not in releases.aliases(version)


def test_the_docs_carry_the_table() -> None:
    doc = (ROOT / "docs" / "sglang-versions.md").read_text()
    assert releases_doc.markdown_flags() in doc
    assert releases_doc.markdown_removed() in doc
    assert releases_doc.markdown_table() in doc
    assert releases_doc.markdown_same() in doc
