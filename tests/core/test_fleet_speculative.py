"""Speculative decoding as the panels get it, from what real SGLang 0.5.17 servers answered: the
draft's algorithm, steps, draft tokens and accept length with a draft; none without one (0.5.17
exports 0.0 and 0 steps then)."""

from __future__ import annotations

import json

import pytest
from repo_paths import FIXTURES

from tui.fleet.speculative import SpecDecode, speculative
from tui.servers.payloads import ServerInfo, ServerLoad, parse_metrics, parse_server_info

REAL = FIXTURES / "real_sglang" / "0.5.17"


def read(name: str) -> tuple[ServerLoad, ServerInfo]:
    load = parse_metrics((REAL / name / "metrics.txt").read_bytes())
    info = parse_server_info(json.loads((REAL / name / "server_info.json").read_text()))
    return load, info


def test_a_real_draft_is_shown_with_its_steps() -> None:
    load, info = read("spec")
    assert speculative(load, info) == SpecDecode(
        algorithm="EAGLE", accept_length=1.0, accept_rate=0.0, steps=3, draft_tokens=4
    )


@pytest.mark.parametrize("name", ["base", "cap"])
def test_no_draft_is_none_though_0517_exports_zeros(name: str) -> None:
    load, info = read(name)
    assert load.spec_num_steps == 0 and load.spec_accept_rate == 0.0
    assert speculative(load, info) is None


def test_metrics_alone_or_the_log_alone_say_a_draft_runs() -> None:
    assert speculative(ServerLoad(spec_num_steps=2), None) == SpecDecode(None, None, None, 2, None)
    assert speculative(None, None, logged_accept=2.4) == SpecDecode(None, 2.4, None, None, None)
    assert speculative(ServerLoad(accept_len=None, spec_num_steps=0), None) is None
