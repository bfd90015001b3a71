"""The agent's operation requests, checked before anything runs: one line naming the field."""

from __future__ import annotations

import pytest

from tui.agent.requests import BadRequest, parse_request


def test_a_rollback_may_carry_the_profile_it_expects_and_nothing_else_may() -> None:
    """A canary judged from the console rolls its GPU back only if the GPU still runs the
    candidate (``expect``): another operation may have changed it during the window."""
    guarded = parse_request({"kind": "rollback", "gpus": [3], "expect": "node-worse"})
    assert (guarded.gpus, guarded.expect) == ((3,), "node-worse")
    assert guarded.args()["expect"] == "node-worse"
    assert parse_request({"kind": "rollback"}).expect is None
    with pytest.raises(BadRequest, match=r"^expect: only a rollback takes it, not apply$"):
        parse_request({"kind": "apply", "profile": "p", "expect": "p"})
    with pytest.raises(BadRequest, match=r"^expect: 7 must be a profile name: "):
        parse_request({"kind": "rollback", "expect": 7})
    unknown = r"^colour: unknown field \(allowed: kind, .*expect, drain_s\)$"
    with pytest.raises(BadRequest, match=unknown):
        parse_request({"kind": "rollback", "colour": "red"})


def test_a_kill_may_carry_the_operator_s_drain_deadline_and_nothing_else_may() -> None:
    kill = parse_request({"kind": "kill", "gpus": [1], "drain_s": 90})
    assert kill.drain_s == 90.0 and kill.args()["drain_s"] == 90.0
    assert parse_request({"kind": "kill", "gpus": [1]}).drain_s is None
    for bad in (0, -1, 2e6, True, "60"):
        with pytest.raises(BadRequest, match=r"^drain_s: .* must be seconds in \(0, 1000000\]$"):
            parse_request({"kind": "kill", "gpus": [1], "drain_s": bad})
    with pytest.raises(BadRequest, match=r"^drain_s: only a kill takes it, not apply$"):
        parse_request({"kind": "apply", "profile": "p", "drain_s": 5})
