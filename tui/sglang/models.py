"""Model specifications the simulator and the memory planner know, calibrated from real logs.

``qwen3.6-27b`` is the seed's hybrid model (Qwen3.5/3.6 27B: 64 layers, 16 full-attention layers
with 4 KV heads of dim 256, 48 Gated-DeltaNet layers with 48 value heads and 16 key heads of dim
128, conv kernel 4, FP8 weights, one MTP layer as the EAGLE draft). Every size below reproduces the
seed's log lines exactly (SGLang prints ``GB`` meaning GiB):

* 200 slots (+1 padding) -> conv_state 201 * 2,949,120 B = 0.55GB, ssm_state 201 * 150,994,944 B =
  28.27GB; intermediate (min(64, 200 // 5) + 1) * 4 draft tokens = 164 slots -> 23.06GB ssm and
  0.45GB conv (the seed build's dense windows; 0.5.23 stores them in 4 + 3 - 1 = 6 of 12 columns:
  0.23GB). 146.81 MiB per slot, the figure sglang-ops.md quotes for this family.
* 798,080 tokens * 32,768 B (16 layers * 4 heads * 256 * 2 B) = 24.36 GB for K and for V; the draft
  pool (one layer) 2,048 B per token = 1.52 GB.
* Baseline 80 slots -> ssm 81 * 150,994,944 B = 11.39 GB, intermediate 68 slots -> 9.56 GB;
  1,142,976 tokens -> 34.88 GB.

The weights (target 52.35 GiB + MTP draft 1.51 GiB, "~54 GB" in the seed) and the 0.6 GiB CUDA
context were then fitted so that the seed's aggressive flags on a B200 give exactly 798,080 KV
tokens; the baseline (fraction 0.88, 80 slots) lands within 0.2% of its 1,142,976.

Every other model's spec is derived from its own config.json (``tui.sglang.modelcfg``). The two
specs here are fixtures checked against their configs (``tests/core/test_modelcfg_shapes.py``: every
shape a config gives is equal); what stays hand-written is the named calibration a config cannot
give: the weights as served, the B200 page size (64: trtllm_mha on SM100), the activation and
CUDA-graph memory, and the simulator's throughput constants.
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1024**3
"""SGLang's ``GB`` in its log lines is 2**30 bytes."""

CUDA_CONTEXT_BYTES = int(0.6 * GIB)
"""Memory the CUDA context, NCCL and workspaces hold before weights load (fitted, see above)."""


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """Shapes and costs of one model, as the memory planner and the scheduler need them."""

    name: str
    """Key used by ``--sim-model``."""
    model_path: str
    """Default ``--model-path`` (what /model_info reports)."""
    architecture: str
    """HF architecture name printed in ``Load weight end. type=...``."""
    quant: str | None
    """Weight quantisation shown as ``quant=fp8, fmt=e4m3``; None: ``dtype=torch.bfloat16``."""
    weight_bytes: int
    """Target model weights resident on the GPU."""
    draft_weight_bytes: int
    """EAGLE/MTP draft weights (counted only with speculative decoding)."""
    kv_bytes_per_token: int
    """K plus V bytes per token over the full-attention layers of the target."""
    draft_kv_bytes_per_token: int
    """K plus V bytes per token of the draft pool (shares the token index space)."""
    is_hybrid_mamba: bool
    """True for Mamba/linear-attention hybrids (a state pool is carved before the KV pool)."""
    conv_state_bytes: int = 0
    """Conv-state bytes per Mamba slot, all linear layers, at the model's conv dtype."""
    ssm_state_bytes: int = 0
    """SSM-state bytes per Mamba slot at float32 (halved by ``--mamba-ssm-dtype bfloat16``)."""
    conv_window: int = 3
    """Conv-state columns per slot (``conv_kernel - 1``): 0.5.23 stores the speculative
    intermediate windows of D draft tokens in ``D + conv_window - 1`` columns, not D times this."""
    is_multimodal: bool = False
    """A vision-language model: SGLang 0.5.23 reserves SGLANG_VLM_CACHE_SIZE_MB (100 MiB) of the
    KV budget for its post-sizing multimodal allocations."""
    context_length: int = 262144
    """Default ``context_len``."""
    default_page_size: int = 1
    """Page size the model runs with when ``--page-size`` is not given."""
    activation_bytes_per_token: int = 0
    """Activation workspace per chunked-prefill token (part of the graph-capture headroom)."""
    graph_base_bytes: int = 0
    """CUDA-graph memory at batch size 1 (target plus draft graphs)."""
    graph_bytes_per_bs: int = 0
    """Extra CUDA-graph memory per captured batch size unit."""
    decode_base_s: float = 0.016
    """Decode step time at batch 1, seconds (B200 reference; see tui.sim.throughput)."""
    decode_per_req_s: float = 0.00055
    """Added decode step time per running request, seconds."""
    accept_length: float = 3.0
    """Mean speculative accept length (tokens per request per step) when spec decoding is on,
    at ``reference_draft_tokens``."""
    reference_draft_tokens: int = 4
    """Draft tokens per request (EAGLE chain: steps + 1) at which ``decode_base_s``,
    ``decode_per_req_s`` and ``accept_length`` were calibrated (the seed's 3 steps, topk 1)."""
    draft_accept_rate: float = 0.81
    """Chance that a draft token is accepted given the ones before it were: the chain's accept
    length is 1 + a + a^2 + ... (one term per draft token), scaled to ``accept_length`` at the
    reference (0.81 gives 3.0 at 4 draft tokens)."""
    draft_step_s: float = 0.002
    """Draft-model forward per speculative step, seconds (B200 reference): each step is one
    small forward (``srt/speculative/eagle_worker_v2.py``, one per speculative step)."""
    eager_overhead_s: float = 0.006
    """Added decode step time when the batch is above the CUDA-graph ceiling and runs eagerly
    (kernel launches no longer replayed from a graph), seconds."""
    prefill_tokens_per_s: float = 40000.0
    """Prefill throughput, used to log input throughput."""
    ssm_dtype_bytes: int = 4
    """Bytes per element of ``ssm_state_bytes``: the model's own SSM dtype (its config's
    ``mamba_ssm_dtype``, float32 by default); ``--mamba-ssm-dtype`` rescales from it."""
    draft_kv_budgeted_builds: frozenset[str] = frozenset({"0.5.23", "0.5.17", "seed"})
    """Builds that count ``draft_kv_bytes_per_token`` in the token budget (the draft pool is
    allocated either way; see ``tui.sglang.arch_support.draft_kv_budgeted_builds``). The two
    hand-written specs count it everywhere: that is how the seed's numbers were fitted."""
    kv_layout: str = "mha"
    """``mha`` (separate K and V pools) or ``mla`` (one latent pool: SGLang prints ``KV size``)."""
    weights_source: str = "calibrated"
    """Where ``weight_bytes`` came from: ``calibrated`` (fitted to a real log), ``safetensors``
    (the checkpoint's headers) or ``estimated (why)`` (the config's shapes: ``--load-format
    dummy``, no weights in the folder, or a shard that could not be read)."""
    config_path: str = ""
    """The config.json the spec was derived from (empty for the hand-written specs)."""

    @property
    def mamba_slot_bytes(self) -> int:
        """Bytes of one Mamba state slot (conv plus ssm) at the default dtypes."""
        return self.conv_state_bytes + self.ssm_state_bytes


MODELS: dict[str, ModelSpec] = {
    "qwen3.6-27b": ModelSpec(
        name="qwen3.6-27b",
        model_path="Qwen/Qwen3.6-27B-FP8",
        architecture="Qwen3_5ForConditionalGeneration",
        quant="fp8",
        weight_bytes=56_210_384_486,
        draft_weight_bytes=1_616_749_000,
        kv_bytes_per_token=2 * 16 * 4 * 256 * 2,
        draft_kv_bytes_per_token=2 * 1 * 4 * 256 * 2,
        is_hybrid_mamba=True,
        conv_state_bytes=48 * 3 * (2 * 16 * 128 + 48 * 128) * 2,
        ssm_state_bytes=48 * 48 * 128 * 128 * 4,
        conv_window=3,
        is_multimodal=True,
        context_length=262144,
        default_page_size=64,
        activation_bytes_per_token=320 * 1024,
        graph_base_bytes=int(0.8 * GIB),
        graph_bytes_per_bs=6 * 1024**2,
    ),
    "llama-8b": ModelSpec(
        name="llama-8b",
        model_path="meta-llama/Llama-3.1-8B-Instruct",
        architecture="LlamaForCausalLM",
        quant=None,
        weight_bytes=16_060_522_496,
        draft_weight_bytes=0,
        kv_bytes_per_token=2 * 32 * 8 * 128 * 2,
        draft_kv_bytes_per_token=0,
        is_hybrid_mamba=False,
        context_length=131072,
        default_page_size=1,
        activation_bytes_per_token=128 * 1024,
        graph_base_bytes=int(0.3 * GIB),
        graph_bytes_per_bs=2 * 1024**2,
        decode_base_s=0.007,
        decode_per_req_s=0.00012,
        accept_length=1.0,
        prefill_tokens_per_s=60000.0,
    ),
}
"""Models ``--sim-model`` accepts, by name."""


def get_model(name: str) -> ModelSpec:
    """Look a model up by name.

    Args:
        name: a key of MODELS.

    Returns:
        The spec.

    Raises:
        ValueError: naming the value and the allowed names.
    """
    try:
        return MODELS[name]
    except KeyError:
        raise ValueError(
            f"--sim-model: unknown model {name!r}; choose from {sorted(MODELS)}"
        ) from None
