"""The fleet file of a many-node console (``--fleet``): agents in order, each with its own token
file or the default; a file that does not fit is one line naming the field, nothing contacted;
two real agents with different tokens both answer a console built from one file."""

from __future__ import annotations

from pathlib import Path

import pytest
from node_helpers import nodes

from tui.agent.client import parse_agents
from tui.agent.fleet_file import FleetFileError, load_fleet
from tui.agent.nodes import Nodes
from tui.ui import cli as console_cli

pytestmark = [pytest.mark.timeout(120)]


def token(path: Path, text: str) -> Path:
    path.write_text(text + "\n")
    path.chmod(0o600)
    return path


def test_agents_in_order_each_with_its_token(tmp_path: Path) -> None:
    token(tmp_path / "default.token", "tok-default")
    token(tmp_path / "two.token", "tok-two")
    fleet = tmp_path / "nodes.toml"
    fleet.write_text(
        'token_file = "default.token"\n'
        '[[agent]]\naddress = "127.0.0.1:9401"\n'
        '[[agent]]\naddress = "https://node2:9400"\ntoken_file = "two.token"\n'
    )
    first, second = load_fleet(fleet, None)
    assert (first.label, first.scheme, first.token) == ("127.0.0.1:9401", "http", "tok-default")
    assert (second.label, second.scheme, second.token) == ("node2:9400", "https", "tok-two")
    assert "tok-" not in repr(first), "a token must not show in a repr"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[[agent]]\naddress = 'a:1'\n", "agent[0].token_file: no token"),
        ("[[agent]]\naddress = 'a:99999'\ntoken_file = 't'\n", "agent[0].address:"),
        ("[[agent]]\naddress = 'a:1,b:2'\ntoken_file = 't'\n", "agent[0].address: must be one"),
        ("[[agent]]\nadress = 'a:1'\n", "agent[0].adress: unknown key"),
        ("agents = []\n", "agents: unknown key"),
        ("token_file = 't'\n", "agent: give 1-256"),
        ("[[agent]]\naddress = 'a:1'\ntoken_file = 'missing'\n", "agent[0].token_file:"),
        ("[[agent]]\naddress = 'a:1'\n[[agent]]\naddress = 'a:1'\n", "listed twice"),
        ("[[agent]\n", "not TOML"),
    ],
)
def test_a_bad_fleet_file_is_one_line_naming_the_field(
    tmp_path: Path, text: str, expected: str
) -> None:
    token(tmp_path / "t", "tok")
    fleet = tmp_path / "nodes.toml"
    fleet.write_text(text)
    default = "tok-default" if "listed twice" in expected else None
    with pytest.raises(FleetFileError) as error:
        load_fleet(fleet, default)
    assert expected in str(error.value) and str(fleet) in str(error.value)
    assert "\n" not in str(error.value)


def test_the_console_refuses_a_bad_fleet_file_and_both_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet = tmp_path / "nodes.toml"
    fleet.write_text("[[agent]]\naddress = 'a:1'\n")
    assert console_cli.main(["--fleet", str(fleet), "--token-file", str(tmp_path / "no")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gpufleet console: --token-file=") and "\n" not in err
    assert console_cli.main(["--fleet", str(fleet), "--agents", "a:1"]) == 2
    assert "give one of --agents, --fleet or --profile" in capsys.readouterr().err


async def test_two_agents_with_their_own_tokens_from_one_file(tmp_path: Path) -> None:
    with nodes(tmp_path, count=2, gpus=1, agents=False) as (n1, n2):
        n2.token_file = token(tmp_path / "n2.token", "n2-own-token")
        n1.start_agent()
        n2.start_agent()
        fleet = tmp_path / "nodes.toml"
        fleet.write_text(
            f'token_file = "{n1.token_file}"\n'
            f'[[agent]]\naddress = "{n1.agent_address}"\n'
            f'[[agent]]\naddress = "{n2.agent_address}"\ntoken_file = "n2.token"\n'
        )
        backend = Nodes(load_fleet(fleet, None), "")
        snapshot = await backend.poll()
        await backend.aclose()
        assert [(s.name, s.reachable) for s in snapshot.nodes] == [("n1", True), ("n2", True)]
        assert sorted(p.gpu_index for p in snapshot.panels) == [0, 100]
        # With the first node's token for both, the second refuses: the tokens really differ.
        both = parse_agents(f"{n1.agent_address},{n2.agent_address}")
        backend = Nodes(both, n1.token_file.read_text().strip())
        snapshot = await backend.poll()
        await backend.aclose()
        assert [s.reachable for s in snapshot.nodes] == [True, False]
        assert "HTTP 401" in snapshot.nodes[1].error
