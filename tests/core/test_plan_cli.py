"""``gpufleet plan``: one command from a model folder, a GPU (or a real log's measurements) and
flags to SGLang's predicted allocation, and its verdict against the log's own lines."""

from __future__ import annotations

from pathlib import Path

import pytest
from repo_paths import FIXTURES

from tui.profiles import load_profile
from tui.retune import plan_cli
from tui.retune.preflight import preflight

TINY = str(FIXTURES / "model_configs" / "gpufleet--tiny-qwen35")
SERVE = [
    "--load-format", "dummy", "--attention-backend", "triton", "--disable-cuda-graph",
    "--mem-fraction-static", "0.2", "--context-length", "4096",
    "--max-running-requests", "16", "--max-mamba-cache-size", "64",
]  # fmt: skip


def _log(tmp_path: Path, tokens: int) -> Path:
    """A 0.5.17 launch's lines (as its source prints them) for the tiny model on an H200."""
    log = tmp_path / "sgl.log"
    log.write_text(
        "[2026-07-01 10:00:00] server_args=ServerArgs(model_path='/tmp/tiny', "
        "mem_fraction_static=0.2, max_running_requests=16)\n"
        "[2026-07-01 10:00:09] Load weight begin. avail mem=139.25 GB\n"
        "[2026-07-01 10:00:09] Load weight end. elapsed=0.05 s, type=Qwen3_5ForCausalLM, "
        "dtype=torch.bfloat16, avail mem=139.24 GB, mem usage=0.01 GB.\n"
        "[2026-07-01 10:00:10] Mamba Cache is allocated. max_mamba_cache_size: 64, "
        "conv_state size: 0.00GB, ssm_state size: 0.01GB \n"
        f"[2026-07-01 10:00:10] KV Cache is allocated. dtype: torch.bfloat16, #tokens: {tokens}, "
        "K size: 13.89 GB, V size: 13.89 GB\n"
        "[2026-07-01 10:00:10] Memory pool end. avail mem=111.40 GB\n"
        f"[2026-07-01 10:00:12] max_total_num_tokens={tokens}, chunked_prefill_size=8192, "
        "max_prefill_tokens=16384, max_running_requests=16, context_len=4096, "
        "available_gpu_mem=111.38 GB\n"
    )
    return log


def test_a_log_that_matches_is_one_command_and_exit_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The log's 139.25 GiB before the weights plus the 73,371,448 B 0.5.17 took before printing
    it is pre; 139.24 GiB after them; slack 0.8 * pre, 65 slots of 205,824 B, 512 B a token:
    (avail - slack - 13,378,560) // 512 = 58,243,938 tokens."""
    rc = plan_cli.main(
        [TINY, "--build", "0.5.17", "--log", str(_log(tmp_path, 58_243_938)), *SERVE]
    )
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "weights   0.01 GB target + 0.00 GB draft (measured (pre - avail))" in out
    assert "ignored   --attention-backend triton (not part of the memory plan)" in out
    assert (
        "predicted mamba_slots=64 conv_state_bytes=599040 ssm_state_bytes=12779520 "
        "kv_tokens=58243938 k_bytes=14910448128 v_bytes=14910448128 max_running_requests=16"
    ) in out
    assert (
        "  KV Cache is allocated. dtype: torch.bfloat16, #tokens: 58243938, K size: 13.89 GB" in out
    )
    assert (
        "compare   kv_tokens: predicted 58243938, log 58243938, off +0 (rounding allows +-18876) ok"
    ) in out
    assert "compare   max_running_requests: predicted 16, log 16, off +0" in out


def test_a_log_that_disagrees_beyond_its_rounding_exits_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _log(tmp_path, 58_243_938 + 40_000)
    rc = plan_cli.main([TINY, "--build", "0.5.17", "--log", str(log), *SERVE])
    out = capsys.readouterr().out
    assert rc == 3
    assert "compare   kv_tokens: predicted 58243938, log 58283938, off -40000" in out
    assert out.rstrip().endswith("ok")  # the GB lines still agree at two decimals
    assert "DIFFERS" in out


def test_a_gpu_capacity_alone_plans_and_a_failure_exits_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert plan_cli.main(["llama-8b", "--gpu", "h100", "--mem-fraction-static", "0.85"]) == 0
    assert "max_running_requests=" in capsys.readouterr().out
    rc = plan_cli.main(["llama-8b", "--gpu-gb", "16", "--mem-fraction-static", "0.85"])
    out = capsys.readouterr().out
    assert rc == 1
    assert "fails     ValueError: Loaded weights leave no GPU memory for the KV cache" in out


def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text('{"architectures": ["Qwen3ForCausalLM"]}')
    with pytest.raises(SystemExit) as info:
        plan_cli.main([str(broken), "--gpu", "h100"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err == (
        f"gpufleet plan: {broken}/config.json: num_hidden_layers missing (needed for the layer "
        "count) (see gpufleet plan --help)\n"
    )
    with pytest.raises(SystemExit):
        plan_cli.main([TINY])
    assert "give the GPU: --gpu-gb, --gpu, --pre-gb or --log" in capsys.readouterr().err


SEED_900 = [
    "--mem-fraction-static", "0.88", "--max-mamba-cache-size", "900",
    "--speculative-algorithm", "EAGLE", "--speculative-num-draft-tokens", "4",
    "--mamba-radix-cache-strategy", "extra_buffer",
]  # fmt: skip
"""The seed's model and knobs with 900 Mamba slots: SGLang's message asks for a fraction "above
0.318" where it is already 0.88 (the Mamba pool, carved first, took what the weights left)."""


def test_plan_gives_the_forms_diagnosis_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before, ``gpufleet plan`` printed only SGLang's 'Raise --mem-fraction-static above 0.318'
    while the form's preflight said that the 900 slots take 157.3 GB: now the same words."""
    assert plan_cli.main(["qwen3.6-27b", "--gpu", "b200", *SEED_900]) == 1
    (fails,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("fails")]
    ours, sglang = fails.removeprefix("fails     ").split(". SGLang's own message", 1)
    assert ours.startswith(
        "the Mamba pool's 900 slots and their intermediate caches take 157.3 GB of the 95.5 GB "
        "static budget left after the weights: --max-mamba-cache-size "
    )
    assert sglang.startswith(", misleading here (the fraction is already 0.88): ValueError: ")
    assert "Raise --mem-fraction-static above 0.318" in sglang
    profile = tmp_path / "seed-900.toml"
    profile.write_text(
        '[engine]\nkind = "sim"\nsim_gpu = "b200"\nsim_model = "qwen3.6-27b"\n'
        "[fleet]\ngpus = [0]\nbase_port = 31000\n"
        '[server]\nmodel_path = "Qwen/Qwen3.6-27B-FP8"\nmem_fraction_static = 0.88\n'
        'max_mamba_cache_size = 900\nmamba_radix_cache_strategy = "extra_buffer"\n'
        'speculative_algorithm = "EAGLE"\nspeculative_num_steps = 3\n'
        "speculative_eagle_topk = 1\nspeculative_num_draft_tokens = 4\n"
    )
    form = preflight(load_profile(profile), 0)
    assert form.why_not == "does not fit: " + fails.removeprefix("fails     ")


def test_without_speculative_decoding_no_intermediate_caches_are_named(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The diagnosis said 'the Mamba pool's 900 slots and their intermediate caches' also where
    there are none (they exist only for speculative decoding)."""
    plain = SEED_900[:4]
    assert plan_cli.main(["qwen3.6-27b", "--gpu", "b200", *plain]) == 1
    (fails,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("fails")]
    assert fails.startswith("fails     the Mamba pool's 900 slots take 129.2 GB of the 97.0 GB ")
    assert "intermediate" not in fails
