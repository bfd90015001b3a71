"""Profiles: validation (every problem, naming field, value and range), round-trip, argv, diff."""

from __future__ import annotations

import copy
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from repo_paths import ROOT

from tui.paths import state_dir
from tui.profiles import (
    ProfileError,
    argv_for,
    diff,
    env_for,
    flags_for,
    list_profiles,
    load_named,
    load_profile,
    log_path_for,
    profile_from_dict,
    save_profile,
)

SHIPPED = ROOT / "profiles"

BASE: dict[str, Any] = {
    "name": "t",
    "engine": {"kind": "sglang", "python": "python3"},
    "fleet": {"gpus": [0, 5], "base_port": 31000, "log_dir": "/logs"},
    "server": {
        "model_path": "Qwen/Qwen3.6-27B-FP8",
        "mem_fraction_static": 0.9,
        "max_running_requests": 32,
        "mamba_radix_cache_strategy": "extra_buffer",
        "extra_flags": {"enable_metrics": True, "chunked_prefill_size": 8192, "log_level": "info"},
    },
}


def _with(**changes: Any) -> dict[str, Any]:
    """BASE with dotted keys replaced, e.g. _with(**{"server.mem_fraction_static": 2})."""
    doc = copy.deepcopy(BASE)
    for dotted, value in changes.items():
        *parents, last = dotted.split(".")
        node = doc
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value
    return doc


def _problems(doc: dict[str, Any]) -> list[str]:
    with pytest.raises(ProfileError) as err:
        profile_from_dict(doc, "t")
    return [str(p) for p in err.value.problems]


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("server.mem_fraction_static", 1.3, "server.mem_fraction_static = 1.3: must be in (0, 1)"),
        ("server.mem_fraction_static", 0, "server.mem_fraction_static = 0: must be in (0, 1)"),
        ("server.max_mamba_cache_size", 0, "= 0: must be an integer >= 1"),
        ("server.mamba_full_memory_ratio", 11.0, "= 11.0: must be in (0, 10]"),
        ("server.max_running_requests", -4, "= -4: must be an integer >= 1"),
        ("server.max_running_requests", 2.5, "= 2.5: must be an integer, not float"),
        ("server.max_running_requests", True, "= True: must be an integer, not bool"),
        ("server.mem_fraction_static", "0.9", "= '0.9': must be a number, not str"),
        (
            "server.mamba_radix_cache_strategy",
            "lazy",
            "invalid choice); allowed: one of auto, no_buffer, extra_buffer, extra_buffer_lazy",
        ),
        ("server.speculative_algorithm", "MEDUSA", "no speculative algorithm 'MEDUSA'"),
        ("fleet.gpus", [], "fleet.gpus = []: must be a non-empty list"),
        ("fleet.base_port", 65535, "fleet.ports[1] = 65536: must be in 1..65535"),
        ("fleet.log_file", "one.log", "must contain {gpu} or {port}"),
        ("engine.kind", "vllm", "engine.kind = 'vllm': must be 'sglang' or 'sim'"),
        ("engine.sim_gpu", "a100", "must be one of b200, h200, h100"),
        ("env.CUDA_VISIBLE_DEVICES", "3", "set per GPU by gpufleet"),
        ("server.extra_flags.port", 1, "not allowed in extra_flags"),
        ("server.extra_flags.max_running_requests", 8, "set server.max_running_requests"),
        ("server.extra_flags.mamba_scheduler_strategy", "x", "mamba_radix_cache_strategy"),
        ("server.extra_flags.json_args", [1], "must be a string, integer, float or boolean"),
    ],
)
def test_each_bad_value_names_field_value_and_range(field: str, value: Any, expected: str) -> None:
    problems = _problems(_with(**{field: value}))
    assert any(expected in p for p in problems), problems


def test_per_gpu_override_is_validated_with_its_own_field_name() -> None:
    problems = _problems(_with(**{"gpu.5.mem_fraction_static": 1.3}))
    assert problems == ["gpu.5.mem_fraction_static = 1.3: must be in (0, 1)"]
    assert "no such GPU" in _problems(_with(**{"gpu.2.max_running_requests": 4}))[0]


def test_unknown_knob_gets_did_you_mean() -> None:
    problems = _problems(_with(**{"server.max_mamba_cache": 200}))
    assert problems[0].startswith("server.max_mamba_cache = 200: unknown key")
    assert "did you mean 'max_mamba_cache_size'?" in problems[0]
    assert "did you mean 'fleet'" in _problems(_with(fleeet={}))[0]


@pytest.mark.parametrize(
    "value",
    ["Qwen; rm -rf /", "a b", "$(id)", "x`id`", "a|b", "a&&b", "line\nbreak", "q'uote", "a>b"],
)
def test_shell_metacharacters_and_whitespace_refused(value: str) -> None:
    for field in ("server.model_path", "server.extra_flags.served_model_name", "env.FOO"):
        problems = _problems(_with(**{field: value}))
        assert any(p.startswith(f"{field} = ") and "shell metacharacters" in p for p in problems), (
            problems
        )
    bad_name = _problems(_with(**{"server.extra_flags": {"bad;name": 1}}))
    assert "flag name must be" in bad_name[0]


def test_duplicate_ports_and_gpus_and_all_problems_reported() -> None:
    doc = _with(**{"fleet.ports": [31000, 31000], "fleet.base_port": None})
    del doc["fleet"]["base_port"]
    doc["fleet"]["gpus"] = [0, 0, 1]
    doc["fleet"]["ports"] = [31000, 31000, 70000]
    doc["server"]["mem_fraction_static"] = 3
    problems = _problems(doc)
    joined = "\n".join(problems)
    assert "fleet.gpus[1] = 0: duplicate GPU index" in joined
    assert "fleet.ports[2] = 70000: must be in 1..65535" in joined
    assert "duplicate port(s) [31000]" in joined
    assert "server.mem_fraction_static = 3: must be in (0, 1)" in joined
    assert len(problems) >= 4


def test_argv_exact_with_override_and_extra_flags() -> None:
    doc = _with(**{"gpu.5.max_running_requests": 8, "gpu.5.mem_fraction_static": "auto"})
    doc["gpu"]["5"]["extra_flags"] = {"enable_metrics": False, "cuda_graph_max_bs_decode": 64}
    profile = profile_from_dict(doc, "t")
    common = ["python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3.6-27B-FP8"]
    assert argv_for(profile, 0) == [
        *common, "--host", "127.0.0.1", "--port", "31000",
        "--mem-fraction-static", "0.9", "--max-running-requests", "32",
        "--mamba-radix-cache-strategy", "extra_buffer",
        "--enable-metrics", "--chunked-prefill-size", "8192", "--log-level", "info",
    ]  # fmt: skip
    assert argv_for(profile, 5) == [
        *common, "--host", "127.0.0.1", "--port", "31001",
        "--max-running-requests", "8", "--mamba-radix-cache-strategy", "extra_buffer",
        "--chunked-prefill-size", "8192", "--log-level", "info", "--cuda-graph-max-bs-decode", "64",
    ]  # fmt: skip
    assert flags_for(profile, 5).mem_fraction_static is None
    with pytest.raises(KeyError, match="GPU 3 is not in profile"):
        argv_for(profile, 3)


def test_legacy_flag_and_sim_engine_argv() -> None:
    # The pre-rename flag name is refused by 0.5.23, the default release (0.5.19 took the alias).
    legacy_problems = _problems(_with(**{"engine.legacy_mamba_flag": True}))
    assert legacy_problems == [
        "engine.legacy_mamba_flag = 'extra_buffer': emits --mamba-scheduler-strategy, the name "
        "SGLang used before the rename: SGLang 0.5.23 has no flag --mamba-scheduler-strategy "
        "(it exits 2: unrecognized arguments); did you mean --mamba-radix-cache-strategy?"
    ]
    legacy = profile_from_dict(_with(**{"engine.legacy_mamba_flag": False}), "t")
    engine = {"kind": "sim", "sim_gpu": "h200", "sim_speed": 50, "sim_model": "llama-8b"}
    sim = profile_from_dict(_with(engine=engine), "t")
    argv = argv_for(sim, 5)
    assert argv[:4] == [sys.executable, "-m", "tui", "sim"]
    assert argv[-6:] == ["--sim-gpu", "h200", "--sim-speed", "50.0", "--sim-model", "llama-8b"]
    # The simulator's own parser judges its own flags.
    assert _problems(_with(engine={**engine, "sim_model": "m"})) == [
        "engine.sim_model = 'm': gpufleet sim refuses --sim-model 'm' (it exits 2: 'm' is "
        "neither a model name (llama-8b, qwen3.6-27b) nor a folder)"
    ]
    assert "--sim-gpu" not in argv_for(legacy, 0)


def test_env_and_log_path(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = _with(env={"SGLANG_X": "1"}, **{"fleet.log_dir": "{state}/logs"})
    doc["fleet"]["log_file"] = "srv_{gpu}_{port}.log"
    profile = profile_from_dict(doc, "t")
    env = env_for(profile, 5, base={"PATH": "/bin", "CUDA_VISIBLE_DEVICES": "0,1"})
    assert env == {"PATH": "/bin", "SGLANG_X": "1", "CUDA_VISIBLE_DEVICES": "5"}
    assert log_path_for(profile, 5) == state_dir() / "logs" / "srv_5_31001.log"


@pytest.mark.parametrize(
    ("value", "shown"),
    [(-1, "-1"), (256, "256"), (0.5, "0.5"), ("0", "'0'"), (True, "True"), ([0], "[0]")],
)
def test_a_slot_s_device_is_one_gpu_index_named_with_its_range(value: Any, shown: str) -> None:
    problems = _problems(_with(**{"gpu.5.device": value}))
    assert problems == [f"gpu.5.device = {shown}: must be a GPU index, an integer in 0..255"]


def test_two_slots_on_one_device_launch_there_and_round_trip(tmp_path: Path) -> None:
    doc = _with(**{"gpu.5.device": 0, "gpu.5.mem_fraction_static": 0.45})
    profile = profile_from_dict(doc, "t")
    assert (profile.device_for(0), profile.device_for(5)) == (0, 0)
    assert profile.neighbours_of(5) == (0,) and profile.neighbours_of(0) == (5,)
    env = env_for(profile, 5, base={"CUDA_VISIBLE_DEVICES": "5"})
    assert env["CUDA_VISIBLE_DEVICES"] == "0"
    assert argv_for(profile, 5)[argv_for(profile, 5).index("--port") + 1] == "31001"
    again = load_profile(save_profile(profile, tmp_path / "shared.toml"))
    assert again == profile
    assert tomllib.loads((tmp_path / "shared.toml").read_text())["gpu"]["5"]["device"] == 0
    alone = profile_from_dict(BASE, "t")
    assert alone.device_for(5) == 5 and alone.neighbours_of(5) == ()
    assert [str(c) for c in diff(alone, profile)] == [
        "gpu.5.device: (unset) -> 0",
        "gpu.5.mem_fraction_static: (unset) -> 0.45",
    ]


def test_round_trip_of_every_shipped_profile(tmp_path: Path) -> None:
    paths = list_profiles(SHIPPED)
    assert {p.stem for p in paths} >= {"b200-baseline", "b200-aggressive", "sim-baseline"}
    for path in paths:
        profile = load_profile(path)
        again = load_profile(save_profile(profile, tmp_path / path.name))
        assert again == profile
    doc = _with(**{"gpu.5.max_running_requests": 8, "gpu.5.mem_fraction_static": "auto"})
    doc["fleet"] = {"gpus": [5, 0], "ports": [31007, 31003], "log_dir": "/l"}
    profile = profile_from_dict(doc, "t")
    assert load_profile(save_profile(profile, tmp_path / "x.toml")) == profile


def test_shipped_profiles_match_the_seed() -> None:
    aggressive = load_named("b200-aggressive", SHIPPED)
    baseline = load_named("b200-baseline", SHIPPED)
    assert aggressive.gpus == tuple(range(7)) and aggressive.ports == tuple(range(30000, 30007))
    assert str(log_path_for(aggressive, 3)) == "/workspace/logs/sglang_gpu3.log"
    s = aggressive.server
    assert (s.mem_fraction_static, s.max_mamba_cache_size) == (0.93, 200)
    assert (s.mamba_full_memory_ratio, s.max_running_requests) == (0.6, 64)
    assert (s.speculative_num_steps, s.speculative_eagle_topk) == (3, 1)
    assert s.speculative_num_draft_tokens == 4
    assert baseline.server.mamba_full_memory_ratio == 0.4
    assert baseline.server.max_running_requests is None
    sim = load_named("sim-aggressive", SHIPPED)
    assert sim.server == aggressive.server and sim.engine.kind == "sim"
    assert sim.log_dir.startswith("{state}")


def test_diff_reports_fields_and_per_gpu_overrides() -> None:
    a = profile_from_dict(BASE, "a")
    b_doc = _with(**{"server.max_running_requests": 64, "gpu.5.max_mamba_cache_size": 200})
    b_doc["fleet"]["base_port"] = 32000
    del b_doc["server"]["mem_fraction_static"]
    b = profile_from_dict(b_doc, "b")
    changes = {c.field: (c.old, c.new) for c in diff(a, b)}
    assert changes == {
        "server.max_running_requests": (32, 64),
        "server.mem_fraction_static": (0.9, None),
        "gpu.5.max_mamba_cache_size": (None, 200),
        "fleet.ports": ([31000, 31001], [32000, 32001]),
    }
    assert diff(a, a) == []
    assert "server.max_running_requests: 32 -> 64" in [str(c) for c in diff(a, b)]


def test_unreadable_and_invalid_toml_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("name = [unclosed")
    with pytest.raises(ProfileError, match="is not valid TOML"):
        load_profile(bad)
    with pytest.raises(ProfileError, match="no such file or profile"):
        load_named("nope", tmp_path)
    assert tomllib.loads((SHIPPED / "sim-baseline.toml").read_text())["engine"]["kind"] == "sim"
