"""Environment variables through the agent's API are an allow-list (issue 36): the node's
``[agent] env`` names what an API profile may set (``DEFAULT_ENV`` when it does not), a pattern
never allows a path, and the variables that load code are refused whatever the list says. Each
refusal is one line naming the variable and the setting that would allow it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tui.agent.policy import DEFAULT_ENV, PolicyError, load_policy
from tui.profiles import Profile, load_named


def _with_env(**env: str) -> Profile:
    return replace(load_named("sim-baseline"), env=tuple(env.items()))


def _refusal(policy_path: Path, **env: str) -> str:
    with pytest.raises(PolicyError) as refused:
        load_policy(path=policy_path).check(_with_env(**env), "profile p")
    message = str(refused.value)
    assert "\n" not in message
    return message


def test_a_variable_off_the_default_list_is_refused_naming_the_setting(tmp_path: Path) -> None:
    """OPENSSL_CONF through the agent ran code in the launched server: it is not a tuning
    variable, so it is refused, and the refusal says where to allow it."""
    settings = tmp_path / "settings.toml"
    said = _refusal(settings, OPENSSL_CONF="/tmp/evil.cnf")
    assert said.startswith("profile p: env.OPENSSL_CONF: not allowed through the agent")
    assert f"add 'OPENSSL_CONF' to the node's [agent] env in {settings}" in said
    assert "SGLANG_*" in said  # what is allowed
    policy = load_policy(path=settings)
    assert policy.env == DEFAULT_ENV
    tuning = {
        "SGLANG_ENABLE_JIT_DEEPGEMM": "0",
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
        "NCCL_SOCKET_IFNAME": "eth0",
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "8",
    }
    policy.check(_with_env(**tuning))


def test_a_pattern_never_allows_a_path(tmp_path: Path) -> None:
    settings = tmp_path / "settings.toml"
    paths = (("CUDA_HOME", "/tmp/fake-cuda"), ("HF_HOME", "~/x"), ("NCCL_DEBUG_FILE", ".."))
    for name, value in paths:
        said = _refusal(settings, **{name: value})
        assert f"env.{name} = {value!r}: a path" in said and "not by the pattern" in said


def test_the_node_s_list_replaces_the_default_and_a_name_allows_a_path(tmp_path: Path) -> None:
    settings = tmp_path / "settings.toml"
    settings.write_text('[agent]\nenv = ["SGLANG_*", "HF_HOME", "LD_PRELOAD"]\n')
    policy = load_policy(path=settings)
    policy.check(_with_env(HF_HOME="/data/hf", SGLANG_X="1"))
    assert "env.NCCL_DEBUG: not allowed" in _refusal(settings, NCCL_DEBUG="INFO")
    # The loader's variables stay refused whatever the list says.
    said = _refusal(settings, LD_PRELOAD="/tmp/evil.so")
    assert "env.LD_PRELOAD: not allowed through the agent, whatever the node's" in said


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('[agent]\nenv = "SGLANG_*"\n', "agent.env must be a list of variable names or patterns"),
        ('[agent]\nenv = ["A B"]\n', "agent.env must be a list of variable names or patterns"),
        ("[agent]\nenvs = []\n", "agent.envs is not a setting (allowed: env, python)"),
    ],
)
def test_a_bad_env_setting_is_one_line(tmp_path: Path, text: str, says: str) -> None:
    settings = tmp_path / "settings.toml"
    settings.write_text(text)
    with pytest.raises(PolicyError) as refused:
        load_policy(path=settings)
    assert says in str(refused.value) and str(settings) in str(refused.value)
