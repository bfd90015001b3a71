"""The agent's operations route, one for every command: a body is decoded into a command by its
type hints and the command's own checks (``tui.agent.codec.decode_command``), before anything
runs: one line naming the field and what is allowed."""

from __future__ import annotations

import typing
from typing import Any

import pytest
from ui_helpers import REPO

from tui.agent.codec import (
    WIRE_COMMANDS,
    CodecError,
    decode_command,
    encode_command,
    result_type,
)
from tui.agent.requests import parse_profile
from tui.ops import commands
from tui.ops.commands import Apply, Kill, Restore, Rollback, StopFleet
from tui.profiles import load_profile
from tui.retune.events import ApplyResult


def decode(body: dict[str, Any]) -> commands.Op[Any]:
    return decode_command(body, parse_profile)


def test_a_rollback_may_carry_the_profile_it_expects_and_nothing_else_may() -> None:
    """A canary judged from the console rolls its GPU back only if the GPU still runs the
    candidate (``expect``): another operation may have changed it during the window."""
    guarded = decode({"kind": "rollback", "gpus": [3], "expect": "node-worse"})
    assert guarded == Restore((3,), "node-worse")
    assert decode({"kind": "rollback"}) == Restore()
    with pytest.raises(CodecError, match=r"^expect: not a field of apply \(allowed: kind, "):
        decode({"kind": "apply", "profile": "p", "expect": "p"})
    with pytest.raises(CodecError, match=r"^expect: 7 fits none|^expect: 7 is not a str"):
        decode({"kind": "rollback", "expect": 7})
    unknown = r"^colour: not a field of rollback \(allowed: kind, gpus, expect\)$"
    with pytest.raises(CodecError, match=unknown):
        decode({"kind": "rollback", "colour": "red"})


def test_a_kill_may_carry_the_operator_s_drain_deadline_and_nothing_else_may() -> None:
    assert decode({"kind": "kill", "gpus": [1], "drain_s": 90}) == Kill((1,), drain_s=90.0)
    kill = decode({"kind": "kill", "gpus": [1]})
    assert isinstance(kill, Kill) and kill.drain_s is None
    for bad in (0, -1, 2e6):
        with pytest.raises(CodecError, match=r"^drain_s: .* must be seconds in \(0, 1000000\]$"):
            decode({"kind": "kill", "gpus": [1], "drain_s": bad})
    for wrong in (True, "60"):
        with pytest.raises(CodecError, match=r"^drain_s: .* is not a float"):
            decode({"kind": "kill", "gpus": [1], "drain_s": wrong})
    with pytest.raises(CodecError, match=r"^drain_s: not a field of apply"):
        decode({"kind": "apply", "profile": "p", "drain_s": 5})


def test_every_field_is_checked_before_anything_runs() -> None:
    with pytest.raises(CodecError, match=r"^kind: 'reboot' is not one of kill, relaunch, apply, "):
        decode({"kind": "reboot"})
    with pytest.raises(CodecError, match=r"^gpus: missing \(a kill needs it\)$"):
        decode({"kind": "kill"})
    with pytest.raises(CodecError, match=r"^gpus: \[256\] must be a non-empty list of GPU"):
        decode({"kind": "kill", "gpus": [256]})
    with pytest.raises(CodecError, match=r"^gpus: \[\] must be a non-empty list of GPU indices"):
        decode({"kind": "kill", "gpus": []})
    with pytest.raises(CodecError, match=r"^mode: 'nicely' is not one of"):
        decode({"kind": "kill", "gpus": [0], "mode": "nicely"})
    with pytest.raises(CodecError, match=r"^batch: 65 must be an integer in 1-64$"):
        decode({"kind": "rollout_back", "batch": 65})
    with pytest.raises(CodecError, match=r"^profile: '../etc/passwd' must be a profile name"):
        decode({"kind": "canary", "profile": "../etc/passwd", "gpu": 0})
    relaunch = decode({"kind": "relaunch", "gpus": [2, 0, 2]})
    assert isinstance(relaunch, commands.Relaunch) and relaunch.gpus == (0, 2)


def test_every_command_crosses_the_wire_and_back_the_same() -> None:
    """The console encodes what the agent decodes: every command the route runs, one of each,
    a profile itself as its document (judged on arrival like a profile file)."""
    profile = load_profile(REPO / "profiles" / "sim-aggressive.toml")
    sent: list[commands.Op[Any]] = [
        Kill((0, 2), "terminate", drain_s=30.0),
        commands.Relaunch((1,)),
        Apply("sim-aggressive", (0,), measure=False),
        Apply(profile, (0, 1)),
        Rollback((3,), batch=2, all_at_once=True),
        Restore((3,), "x"),
        commands.Canary("sim-aggressive", 4),
        commands.Rollout("sim-aggressive", 2, (1, 2)),
        StopFleet("kill"),
    ]
    assert {type(c) for c in sent} == set(WIRE_COMMANDS.values())
    for command in sent:
        assert decode(encode_command(command)) == command, command
    assert result_type(Apply) is ApplyResult
    every = set(typing.get_args(commands.Command))
    assert set(WIRE_COMMANDS.values()) < every  # the job, saving, adoption have their routes


def test_a_server_the_operator_confirmed_never_crosses_the_wire() -> None:
    from tui.control.adopt import ConfirmedServer

    with pytest.raises(CodecError, match=r"^confirmed: "):
        encode_command(Kill((0,), confirmed=(ConfirmedServer(0, 42, 7),)))
    with pytest.raises(CodecError, match=r"^confirmed: not a field of kill"):
        decode({"kind": "kill", "gpus": [0], "confirmed": [{"gpu": 0, "pid": 42}]})
