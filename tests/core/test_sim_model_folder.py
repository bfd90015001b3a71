"""``gpufleet sim --sim-model FOLDER``: the simulator serves any model the planner can derive from
its config.json (the autouse fixture points the simulated GPUs at a temporary state dir)."""

from __future__ import annotations

from pathlib import Path

import pytest
from repo_paths import FIXTURES

from tui.sim import cli

TINY = str(FIXTURES / "model_configs" / "gpufleet--tiny-qwen35")


def test_a_config_folder_is_a_simulated_model() -> None:
    argv = ["--port", "39991", "--sim-gpu", "h200", "--sim-model", TINY, "--sim-build", "0.5.17"]
    argv += ["--mem-fraction-static", "0.2", "--max-mamba-cache-size", "64"]
    argv += ["--max-running-requests", "16", "--disable-cuda-graph", "--load-format", "dummy"]
    parser = cli.build_parser()
    args = parser.parse_args(cli.with_model_path(parser, argv))
    config = cli._config(args, argv, None)
    assert config.model.architecture == "Qwen3_5ForCausalLM"
    assert config.model.weights_source == "estimated (load format dummy)"
    assert config.model_path == TINY  # /model_info reports the folder
    plan = config.plan
    assert (plan.build, plan.max_mamba_cache_size, plan.max_running_requests) == ("0.5.17", 64, 16)
    assert plan.mamba_strategy == "auto" and plan.cuda_graph_max_bs == 0


def test_a_folder_it_cannot_plan_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "config.json").write_text('{"architectures": ["JambaForCausalLM"]}')
    parser = cli.build_parser()
    with pytest.raises(SystemExit) as info:
        parser.parse_args(["--model-path", "", "--sim-model", str(tmp_path)])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.endswith("JambaForCausalLM: cannot plan: SGLang (0.5.17, 0.5.23) has no Jamba model")
    assert "--sim-model" in err
