"""Per family: which layers are full attention, and the Mamba / linear-attention state shape.

From SGLang's config classes (``srt/configs/qwen3_next.py`` and ``qwen3_5.py`` for Gated DeltaNet,
``nemotron_h.py``, ``falcon_h1.py``, ``granitemoehybrid.py``) and ``srt/configs/mamba_utils.py``
``Mamba2StateShape.create`` at tensor parallel 1; the defaults are those classes' own defaults.
"""

from __future__ import annotations

from dataclasses import dataclass

from tui.sglang.modelcfg.fields import ConfigView

DTYPE_BYTES = {"float32": 4, "float": 4, "bfloat16": 2, "float16": 2, "half": 2}
"""Bytes per element of the dtype names configs use."""

_SSM_DTYPES = ("float32", "bfloat16", "float16")


@dataclass(frozen=True, slots=True)
class StateShape:
    """One request's Mamba/linear-attention state over all its layers."""

    layers: int
    """Mamba (or Gated DeltaNet) layers."""
    conv_dim: int
    """Conv channels per layer."""
    conv_kernel: int
    """Conv kernel K (the state keeps K - 1 columns)."""
    heads: int
    """Temporal state heads."""
    head_dim: int
    """Temporal state head dim."""
    state_size: int
    """Temporal state size."""
    ssm_dtype: str
    """float32, bfloat16 or float16."""

    @property
    def conv_window(self) -> int:
        """Columns of one conv state (``kernel - 1``)."""
        return self.conv_kernel - 1

    @property
    def conv_state_bytes(self) -> int:
        """Conv state bytes per slot (bfloat16: SGLANG_MAMBA_CONV_DTYPE's default)."""
        return self.layers * self.conv_dim * self.conv_window * 2

    @property
    def ssm_dtype_bytes(self) -> int:
        """Bytes per temporal element."""
        return DTYPE_BYTES[self.ssm_dtype]

    @property
    def ssm_state_bytes(self) -> int:
        """Temporal state bytes per slot at the model's own SSM dtype."""
        return self.layers * self.heads * self.head_dim * self.state_size * self.ssm_dtype_bytes


def num_layers(family: str, text: ConfigView) -> int:
    if family == "nemotron_h":
        return len(nemotron_pattern(text))  # num_hidden_layers is ignored there
    return text.integer("num_hidden_layers", why="the layer count")


def layers_and_state(family: str, text: ConfigView, layers: int) -> tuple[int, StateShape | None]:
    """(full-attention layers, the state shape) of one family."""
    if family == "gdn":
        interval = text.integer("full_attention_interval", why="the layer types (SGLang's rule)")
        if interval <= 0:
            raise text.need("full_attention_interval", "the layer types (a positive interval)")
        full = sum(1 for i in range(layers) if (i + 1) % interval == 0)
        value_heads = text.integer("linear_num_value_heads", 32)
        value_dim = text.integer("linear_value_head_dim", 128)
        key_heads = text.integer("linear_num_key_heads", 16)
        key_dim = text.integer("linear_key_head_dim", 128)
        state = StateShape(
            layers=layers - full,
            conv_dim=value_heads * value_dim + 2 * key_heads * key_dim,
            conv_kernel=text.integer("linear_conv_kernel_dim", 4),
            heads=value_heads,
            head_dim=value_dim,
            state_size=key_dim,
            ssm_dtype=ssm_dtype(text),
        )
        return full, state
    if family == "nemotron_h":
        pattern = nemotron_pattern(text)
        if not text.has("n_groups"):
            raise text.need("n_groups", "the Mamba conv state (SGLang's NemotronHConfig reads it)")
        heads = text.integer("mamba_num_heads", 128)
        head_dim = text.integer("mamba_head_dim", 64)
        return pattern.count("*"), _mamba2(
            layers=pattern.count("M"),
            intermediate=heads * head_dim,
            n_groups=text.integer("n_groups"),
            heads=heads,
            head_dim=head_dim,
            state=text.integer("ssm_state_size", 128),
            kernel=text.integer("conv_kernel", text.integer("mamba_d_conv", 4)),
            ssm_dtype=ssm_dtype(text),
        )
    if family == "falcon_h1":
        hidden = text.integer("hidden_size", 4096)
        intermediate = text.integer("mamba_d_ssm", text.integer("mamba_expand", 2) * hidden)
        heads = text.integer("mamba_n_heads", 128)
        raw_head = text.get("mamba_d_head", "auto")
        head_dim = intermediate // heads if raw_head == "auto" else text.integer("mamba_d_head")
        if intermediate % heads or head_dim * heads != intermediate:
            raise text.need("mamba_d_head", "mamba_d_head * mamba_n_heads == mamba_d_ssm")
        return layers, _mamba2(
            layers=layers,
            intermediate=intermediate,
            n_groups=text.integer("mamba_n_groups", 1),
            heads=heads,
            head_dim=head_dim,
            state=text.integer("mamba_d_state", 256),
            kernel=text.integer("mamba_d_conv", 4),
            ssm_dtype=ssm_dtype(text),
        )
    if family == "granite_hybrid":
        types = granite_types(text, layers)
        hidden = text.integer("hidden_size", 2048)
        heads = text.integer("mamba_n_heads", 64)
        head_dim = text.integer("mamba_d_head", 64)
        intermediate = text.integer("mamba_expand", 2) * hidden
        if types.count("mamba") and head_dim * heads != intermediate:
            raise text.need("mamba_d_head", "mamba_d_head * mamba_n_heads == 2 * hidden_size")
        state = _mamba2(
            layers=types.count("mamba"),
            intermediate=intermediate,
            n_groups=text.integer("mamba_n_groups", 1),
            heads=heads,
            head_dim=head_dim,
            state=text.integer("mamba_d_state", 128),
            kernel=text.integer("mamba_d_conv", 4),
            ssm_dtype="float32",  # GraniteMoeHybridConfig passes no dtype: the float32 default
        )
        return types.count("attention"), state if state.layers else None
    return layers, None  # dense, MoE and MLA models: every layer has a KV cache


def _mamba2(
    *,
    layers: int,
    intermediate: int,
    n_groups: int,
    heads: int,
    head_dim: int,
    state: int,
    kernel: int,
    ssm_dtype: str,
) -> StateShape:
    """``Mamba2StateShape.create`` at tp 1: conv over intermediate + the B/C groups."""
    return StateShape(
        layers=layers,
        conv_dim=intermediate + 2 * n_groups * state,
        conv_kernel=kernel,
        heads=heads,
        head_dim=head_dim,
        state_size=state,
        ssm_dtype=ssm_dtype,
    )


def nemotron_pattern(text: ConfigView) -> str:
    """``hybrid_override_pattern`` (``M`` Mamba, ``*`` attention, ``-`` MLP, ``E`` MoE), from
    the newer ``layers_block_type`` list when the config has one."""
    block_types = text.items("layers_block_type")
    if block_types is not None:
        letters = {"mamba": "M", "attention": "*", "mlp": "-", "moe": "E"}
        if any(t not in letters for t in block_types):
            raise text.need("layers_block_type", "the layer types (mamba/attention/mlp/moe)")
        return "".join(letters[t] for t in block_types)
    pattern = text.get("hybrid_override_pattern")
    if not isinstance(pattern, str) or not pattern or set(pattern) - set("M*-E"):
        raise text.need("hybrid_override_pattern", "the layer types (M, *, -, E)")
    return pattern


def granite_types(text: ConfigView, layers: int) -> list[str]:
    types = text.items("layer_types")
    if types is None:  # GraniteMoeHybridConfig's default: attention every 6th layer
        return ["attention" if (i + 1) % 6 == 0 else "mamba" for i in range(layers)]
    aliases = {"linear_attention": "mamba", "full_attention": "attention"}
    mapped = [aliases.get(t, t) for t in types]
    if len(mapped) != layers or set(mapped) - {"mamba", "attention"}:
        raise text.need("layer_types", f"{layers} entries of mamba/attention")
    return mapped


def ssm_dtype(text: ConfigView) -> str:
    """``mamba_ssm_dtype`` as ``mamba2_state_dtype`` reads it (float32 when absent or invalid)."""
    value = text.get("mamba_ssm_dtype")
    return value if value in _SSM_DTYPES else "float32"
