"""Where the planner reads a model from (a folder, the Hugging Face cache: never the network) and
how it weighs it (safetensors headers only, or the config's shapes)."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest
from repo_paths import FIXTURES

from tui.sglang.modelcfg.errors import ModelConfigError
from tui.sglang.modelcfg.locate import find_model_dir, hub_cache_dir
from tui.sglang.modelcfg.safetensors import (
    MAX_HEADER_BYTES,
    checkpoint_bytes,
    header_tensor_bytes,
)
from tui.sglang.modelcfg.spec import resolve_model

CONFIGS = FIXTURES / "model_configs"
TINY = CONFIGS / "gpufleet--tiny-qwen35"


def write_safetensors(path: Path, tensors: dict[str, int], pad_to: int = 0) -> None:
    """A safetensors file written by hand (8-byte length + JSON header + data), ``tensors`` name
    -> byte size; the data region is zeros (only the header is ever read)."""
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, size in tensors.items():
        header[name] = {
            "dtype": "BF16",
            "shape": [size // 2],
            "data_offsets": [offset, offset + size],
        }
        offset += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(max(offset, pad_to)))


@pytest.fixture()
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty Hugging Face cache in tmp, named by HF_HUB_CACHE."""
    cache = tmp_path / "hub"
    cache.mkdir()
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    return cache


def _cache_model(
    cache: Path, repo: str, commit: str, config: Path, ref: str | None = "main"
) -> Path:
    org, name = repo.split("/")
    root = cache / f"models--{org}--{name}"
    snapshot = root / "snapshots" / commit
    snapshot.mkdir(parents=True)
    shutil.copy(config, snapshot / "config.json")
    if ref is not None:
        (root / "refs").mkdir()
        (root / "refs" / ref).write_text(commit)
    return snapshot


def test_a_hub_id_is_read_from_the_cache_at_refs_main(hub: Path) -> None:
    next_config = CONFIGS / "Qwen--Qwen3-Next-80B-A3B-Instruct" / "config.json"
    old = _cache_model(hub, "Qwen/Qwen3-Next-80B-A3B-Instruct", "a" * 40, next_config)
    # A second, newer snapshot that refs/main points to: it wins, whatever the directory order.
    root = old.parent.parent
    newer = root / "snapshots" / ("b" * 40)
    newer.mkdir()
    shutil.copy(next_config, newer / "config.json")
    (root / "refs" / "main").write_text("b" * 40 + "\n")
    found = find_model_dir("Qwen/Qwen3-Next-80B-A3B-Instruct")
    assert (found.path, found.origin) == (newer, "hf-cache")
    spec = resolve_model("Qwen/Qwen3-Next-80B-A3B-Instruct")
    assert spec.architecture == "Qwen3NextForCausalLM" and spec.is_hybrid_mamba
    assert spec.config_path == str(newer / "config.json")
    assert spec.weights_source == "estimated (no weights in the folder)"


def test_the_cache_directory_follows_huggingface_hubs_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert hub_cache_dir() == tmp_path / ".cache" / "huggingface" / "hub"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert hub_cache_dir() == tmp_path / "xdg" / "huggingface" / "hub"
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    assert hub_cache_dir() == tmp_path / "hf" / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "direct"))
    assert hub_cache_dir() == tmp_path / "direct"


def test_a_model_not_in_the_cache_says_where_it_looked(hub: Path) -> None:
    with pytest.raises(ModelConfigError) as info:
        resolve_model("Qwen/Qwen3-Next-80B-A3B-Instruct")
    message = str(info.value)
    assert message == (
        "model Qwen/Qwen3-Next-80B-A3B-Instruct: not a local folder and not in the Hugging Face "
        f"cache (looked for {hub / 'models--Qwen--Qwen3-Next-80B-A3B-Instruct'}; set HF_HUB_CACHE "
        "or HF_HOME, or pass the folder)"
    )
    with pytest.raises(ModelConfigError, match="no such folder, and not a hub id"):
        resolve_model("/nowhere/model")


def test_a_cache_without_refs_uses_its_only_snapshot_and_refuses_to_guess(hub: Path) -> None:
    snapshot = _cache_model(hub, "org/one", "c" * 40, TINY / "config.json", ref=None)
    assert find_model_dir("org/one").path == snapshot
    (snapshot.parent / ("d" * 40)).mkdir()
    with pytest.raises(ModelConfigError, match="refs/main missing and 2 snapshots"):
        find_model_dir("org/one")


def test_a_folder_without_config_json_is_named(tmp_path: Path) -> None:
    with pytest.raises(ModelConfigError) as info:
        resolve_model(str(tmp_path))
    assert str(info.value) == f"model {tmp_path}: no config.json in folder {tmp_path}"


def test_the_header_reader_sums_tensor_bytes_without_reading_the_data(tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    write_safetensors(path, {"a.weight": 4096, "b.weight": 256}, pad_to=1 << 20)
    assert header_tensor_bytes(path) == {"a.weight": 4096, "b.weight": 256}
    huge = tmp_path / "huge.safetensors"
    huge.write_bytes(struct.pack("<Q", MAX_HEADER_BYTES + 1) + b"{}")
    with pytest.raises(ModelConfigError, match="over the 104857600-byte limit"):
        header_tensor_bytes(huge)
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(struct.pack("<Q", 100) + b'{"a": 1')
    with pytest.raises(ModelConfigError, match="header truncated"):
        header_tensor_bytes(cut)


@pytest.mark.parametrize(
    ("index", "offsets", "needle"),
    [
        ({"weight_map": 5}, [0, 2], "weight_map is not tensor name -> shard file name"),
        ({"weight_map": {"a": ["x"]}}, [0, 2], "weight_map is not tensor name -> shard file"),
        (None, ["0", "2"], "data_offsets ['0', '2'] are not two ascending integers"),
        (None, [None, 2], "data_offsets [None, 2] are not two ascending integers"),
        (None, [8, 2], "data_offsets [8, 2] are not two ascending integers"),
    ],
)
def test_a_malformed_index_or_header_is_one_line_naming_the_file(
    tmp_path: Path, index: dict[str, object] | None, offsets: list[object], needle: str
) -> None:
    # Before: AttributeError, TypeError or a ValueError of int() ("unexpected error" from plan).
    header = json.dumps({"w": {"dtype": "BF16", "shape": [1], "data_offsets": offsets}}).encode()
    shard = tmp_path / "model.safetensors"
    shard.write_bytes(struct.pack("<Q", len(header)) + header)
    if index is not None:
        (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(ModelConfigError) as info:
        checkpoint_bytes(tmp_path, num_layers=4, load_vision=False)
    message = str(info.value)
    assert needle in message and "\n" not in message
    assert message.startswith(str(tmp_path / "model.safetensors"))


def test_weights_come_from_the_headers_split_into_target_and_mtp_draft(tmp_path: Path) -> None:
    model = tmp_path / "qwen35-tiny"
    model.mkdir()
    shutil.copy(TINY / "config.json", model / "config.json")
    write_safetensors(
        model / "model-00001-of-00002.safetensors",
        {"model.embed_tokens.weight": 524_288, "model.layers.0.mlp.up_proj.weight": 262_144},
    )
    write_safetensors(
        model / "model-00002-of-00002.safetensors",
        {"lm_head.weight": 524_288, "mtp.fc.weight": 131_072, "model.visual.x.weight": 1_000},
    )
    index = {
        "weight_map": {
            "a": "model-00001-of-00002.safetensors",
            "b": "model-00002-of-00002.safetensors",
        }
    }
    (model / "model.safetensors.index.json").write_text(json.dumps(index))
    found = checkpoint_bytes(model, num_layers=4, load_vision=False)
    assert found is not None
    # visual.* is not loaded by a text-only architecture; mtp.* is the draft's.
    assert (found.target_bytes, found.draft_bytes, found.files) == (1_310_720, 131_072, 2)
    spec = resolve_model(str(model))
    assert (spec.weight_bytes, spec.draft_weight_bytes) == (1_310_720, 131_072)
    assert spec.weights_source == "safetensors"
    dummy = resolve_model(str(model), load_format="dummy")
    assert dummy.weights_source == "estimated (load format dummy)"
    assert dummy.weight_bytes != spec.weight_bytes
    (model / "model-00002-of-00002.safetensors").unlink()  # the folder changed: derived again
    missing = resolve_model(str(model))
    assert missing.weights_source.startswith("estimated (")
    assert "shard model-00002-of-00002.safetensors missing" in missing.weights_source


def test_the_tiny_models_dummy_weights_are_its_parameters() -> None:
    """make_tiny.py's Qwen3_5ForCausalLM, counted by hand from SGLang's qwen3_5.py modules (bf16):
    embed + lm_head 1024 * 256 each; 3 GDN layers (in_proj_qkvz 256 * 768, in_proj_ba 256 * 8,
    conv 512 * 4, dt_bias + 2 * A_log 3 * 4, norm 64, out_proj 256 * 256); 1 attention layer
    (qkv 256 * (2 * 4 * 64 + 2 * 2 * 64), o 256 * 256, q/k norms 2 * 64); MLPs 3 * 256 * 512 each;
    2 norms of 256 per layer, the final norm 256."""
    spec = resolve_model(str(TINY), load_format="dummy")
    gdn = 256 * 768 + 256 * 8 + 512 * 4 + 3 * 4 + 64 + 256 * 256
    attention = 256 * (512 + 256) + 256 * 256 + 128
    params = 2 * 1024 * 256 + 3 * gdn + attention + 4 * (3 * 256 * 512 + 512) + 256
    assert spec.weight_bytes == 2 * params
    # The MTP draft: one attention layer with its MLP and 2 norms, fc 512 * 256, 3 norms, and its
    # own 1024 * 256 LM head until the pools are sized.
    draft = attention + 3 * 256 * 512 + 2 * 256 + 512 * 256 + 3 * 256 + 1024 * 256
    assert spec.draft_weight_bytes == 2 * draft == 2_099_968
