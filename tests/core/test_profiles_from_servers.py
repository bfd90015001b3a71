"""A profile written from running servers' own command lines (``gpufleet adopt``, issue 35):
the knobs as knobs, every other flag as it was, per-GPU differences as overrides, and one line
for each thing a profile cannot hold, never a silent drop."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from tui.control.takeover import RunningServer
from tui.profiles import argv_for, flags_for
from tui.profiles.from_servers import (
    Drafted,
    DraftError,
    ServerCommand,
    draft_profile,
    relevant_env,
)
from tui.profiles.templates import template_for

PY = "/opt/venv/bin/python"
MODEL = ["--model-path", "/models/qwen"]


def _server(
    gpu: int, flags: Sequence[str], env: Mapping[str, str] | None = None, python: str = PY
) -> ServerCommand:
    argv = (python, "-m", "sglang.launch_server", *MODEL, "--port", str(30000 + gpu), *flags)
    return ServerCommand(gpu, 30000 + gpu, argv, env or {}, python)


def _draft(*servers: ServerCommand, release: str | None = "0.5.17") -> Drafted:
    return draft_profile(
        "mine", servers, release=release, log=("/logs", "sglang_gpu{gpu}.log"), own_env={}
    )


def test_knobs_shared_and_each_gpu_s_difference_as_its_override() -> None:
    common = ["--mem-fraction-static", "0.88", "--mamba-full-memory-ratio", "0.4"]
    drafted = _draft(
        _server(0, [*common, "--max-mamba-cache-size", "80", "--enable-metrics"]),
        _server(1, [*common, "--max-mamba-cache-size", "80", "--enable-metrics"]),
        _server(2, [*common, "--max-mamba-cache-size", "200", "--max-running-requests", "64"]),
    )
    profile = drafted.profile
    assert drafted.lines == ()
    assert profile.server.mem_fraction_static == 0.88
    assert profile.server.mamba_full_memory_ratio == 0.4
    assert profile.server.max_mamba_cache_size == 80
    assert profile.server.max_running_requests is None
    assert dict(profile.server.extra_flags) == {"enable_metrics": True}
    override = profile.override_for(2)
    assert override is not None
    assert dict(override.values) == {"max_mamba_cache_size": 200, "max_running_requests": 64}
    assert dict(override.extra_flags) == {"enable_metrics": False}  # it runs without the switch
    assert flags_for(profile, 2).max_running_requests == 64
    assert "--enable-metrics" not in argv_for(profile, 2)
    assert profile.engine.python == PY and profile.engine.sglang_version == "0.5.17"
    assert (profile.gpus, profile.ports) == ((0, 1, 2), (30000, 30001, 30002))


def test_a_knob_only_some_gpus_set_is_auto_on_the_others() -> None:
    drafted = _draft(
        _server(0, ["--max-running-requests", "16"]),
        _server(1, ["--max-running-requests", "16"]),
        _server(2, []),
    )
    override = drafted.profile.override_for(2)
    assert override is not None and dict(override.values) == {"max_running_requests": None}
    assert "--max-running-requests" not in argv_for(drafted.profile, 2)


def test_every_other_flag_is_kept_as_it_was_and_reproduced() -> None:
    flags = ["--load-format", "dummy", "--context-length", "4096", "--disable-cuda-graph",
             "--attention-backend", "triton", "--tp", "1", "--host", "0.0.0.0"]  # fmt: skip
    drafted = _draft(_server(0, flags))
    assert drafted.lines == ()
    extra = dict(drafted.profile.server.extra_flags)
    assert extra == {
        "load_format": "dummy",
        "context_length": 4096,
        "disable_cuda_graph": True,
        "attention_backend": "triton",
        "tp_size": 1,  # --tp is SGLang's unique prefix of --tp-size: what it read
    }
    assert drafted.profile.host == "0.0.0.0"


def test_what_a_profile_cannot_hold_is_one_line_each_never_dropped_in_silence() -> None:
    flags = [
        "--json-model-override-args", '{"rope": 2}',  # whitespace: no profile value holds it
        "--config", "/etc/sglang.yaml",  # its flags would reach SGLang unchecked
        "--no-such-flag",
        "stray",
    ]  # fmt: skip
    drafted = _draft(_server(0, ["--mem-fraction-static", "0.5", *flags]))
    text = "\n".join(drafted.lines)
    assert "json_model_override_args" in text and "whitespace" in text
    assert "--config: not kept" in text
    assert "no_such_flag" in text and "SGLang 0.5.17 has no flag --no-such-flag" in text
    assert "argument 'stray' belongs to no flag" in text
    assert drafted.profile.server.mem_fraction_static == 0.5


def test_a_flag_given_twice_keeps_the_value_sglang_used_and_says_so() -> None:
    drafted = _draft(_server(0, ["--mem-fraction-static", "0.5", "--mem-fraction-static", "0.6"]))
    assert drafted.profile.server.mem_fraction_static == 0.6
    assert drafted.lines == (
        "port 30000: --mem-fraction-static is given more than once: the last value, the one "
        "SGLang used, is kept",
    )


def test_the_pre_rename_strategy_flag_and_the_model_alias() -> None:
    argv = (PY, "-m", "sglang.launch_server", "--model", "/m", "--port", "30000",
            "--mamba-scheduler-strategy", "extra_buffer")  # fmt: skip
    drafted = _draft(ServerCommand(0, 30000, argv, {}, PY))
    profile = drafted.profile
    assert profile.server.model_path == "/m"
    assert profile.server.mamba_radix_cache_strategy == "extra_buffer"
    assert profile.engine.legacy_mamba_flag
    assert "--mamba-scheduler-strategy" in argv_for(profile, 0)
    assert drafted.lines == ()


def test_sglang_serve_and_a_release_without_a_flag_table() -> None:
    argv = (PY, "/opt/venv/bin/sglang", "serve", *MODEL, "--port", "30000")
    drafted = _draft(ServerCommand(0, 30000, argv, {}, PY), release="0.6.1")
    assert drafted.profile.engine.kind == "sglang"
    assert drafted.profile.engine.sglang_version is None
    assert drafted.lines == (
        "the servers run SGLang 0.6.1, which gpufleet has no flag table for: "
        "engine.sglang_version is left out (the newest table, 0.5.23, judges it)",
    )


def test_the_simulator_s_own_flags_become_its_engine_fields() -> None:
    argv = (PY, "-m", "tui", "sim", "--port", "30000", "--sim-speed", "20", "--sim-gpu", "h100",
            "--sim-build", "0.5.17", "--mem-fraction-static", "0.3")  # fmt: skip
    drafted = _draft(ServerCommand(0, 30000, argv, {}, PY))
    engine = drafted.profile.engine
    assert (engine.kind, engine.sim_speed, engine.sim_gpu) == ("sim", 20.0, "h100")
    assert dict(drafted.profile.server.extra_flags) == {"sim_build": "0.5.17"}
    assert drafted.lines == ()


def test_mixed_programs_are_refused() -> None:
    sim = (PY, "-m", "tui", "sim", "--port", "30001")
    with pytest.raises(DraftError, match="some ports run SGLang and others gpufleet's simulator"):
        _draft(_server(0, []), ServerCommand(1, 30001, sim, {}, PY))


def test_the_environment_a_relaunch_needs_and_never_a_secret() -> None:
    environ = {
        "PYTHONPATH": "/tmp/site",
        "CUDA_HOME": "/usr/local/cuda",
        "HF_HUB_OFFLINE": "1",
        "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1",
        "HF_TOKEN": "hf_secret",
        "AWS_SECRET_ACCESS_KEY": "x",
        "CUDA_VISIBLE_DEVICES": "3",
        "GPUFLEET_LAUNCH_ID": "abc",
        "HOME": "/root",
        "PATH": "/opt/cuda/bin:/usr/bin",
    }
    kept = relevant_env(environ, {"PATH": "/usr/bin"})
    assert kept == {
        "CUDA_HOME": "/usr/local/cuda",
        "HF_HUB_OFFLINE": "1",
        "PATH": "/opt/cuda/bin:/usr/bin",
        "PYTHONPATH": "/tmp/site",
        "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1",
    }
    assert "PATH" not in relevant_env(environ, {"PATH": "/opt/cuda/bin:/usr/bin"})
    drafted = _draft(_server(0, [], environ), _server(1, [], {**environ, "PYTHONPATH": "/x"}))
    assert dict(drafted.profile.env)["PYTHONPATH"] == "/tmp/site"
    assert drafted.lines[0].startswith("the environment (PYTHONPATH, CUDA_HOME, ...) differs")


def test_different_interpreters_are_said() -> None:
    drafted = _draft(_server(0, []), _server(1, [], python="/other/python"))
    assert drafted.profile.engine.python == PY
    assert drafted.lines == (
        f"the interpreter differs between the servers (GPU 0: {PY}, GPU 1: /other/python): "
        "the profile keeps GPU 0's",
    )


def test_the_log_template_follows_the_servers_own_files() -> None:
    assert template_for([(0, 30000, "sglang_gpu0.log"), (1, 30001, "sglang_gpu1.log")]) == (
        "sglang_gpu{gpu}.log"
    )
    assert template_for([(0, 30000, "s-30000.log"), (1, 30001, "s-30001.log")]) == "s-{port}.log"
    assert template_for([(0, 30000, "a.log"), (1, 30001, "b.log")]) is None


def test_the_interpreter_is_looked_up_as_the_server_found_it(tmp_path: object) -> None:
    def server(argv0: str, path: str | None, cwd: str = "/srv") -> RunningServer:
        environ = {"PATH": path} if path is not None else None
        return RunningServer(1, 2, 2, 1, 0.0, (argv0, "-m", "x"), environ, None, cwd=cwd,
                             exe="/usr/bin/python3.12")  # fmt: skip

    assert server("/venv/bin/python", None).interpreter == "/venv/bin/python"
    assert server("venv/bin/python", None).interpreter == "/srv/venv/bin/python"
    assert server("no-such-python-anywhere", "/nonexistent").interpreter == "/usr/bin/python3.12"
