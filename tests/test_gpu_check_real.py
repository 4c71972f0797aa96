"""The GPU check's real-size stage, run on the CPU on a shrunken shape of the same path.

On the lent GPU the stage builds Qwen3.5-2B at real size; here the same
function builds a small version (real vocabulary, layer layout and patch
size; narrow layers) on the CPU and takes it through what the GPU run takes:
a local folder resolved and staged in place, the manager, caption batches of
forced length. What only CUDA shows (NVML, the allocator, the tenant) is the
GPU run's.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
_SPEC = importlib.util.spec_from_file_location(
    "gpu_check_real", REPO_ROOT / "scripts" / "gpu_check_real.py"
)
assert _SPEC is not None and _SPEC.loader is not None
gpu_check_real = importlib.util.module_from_spec(_SPEC)
sys.modules["gpu_check_real"] = gpu_check_real
_SPEC.loader.exec_module(gpu_check_real)

SMALL = {
    "text_config": {
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_hidden_layers": 4,
        "layer_types": ["linear_attention"] * 3 + ["full_attention"],
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "linear_num_value_heads": 2,
        "linear_num_key_heads": 2,
    },
    "vision_config": {"depth": 2, "hidden_size": 64, "intermediate_size": 128, "num_heads": 2},
}


def test_the_real_size_config_is_the_published_shape_with_the_tiny_tokens() -> None:
    from comfy_llm_testworld.checkpoints import build_checkpoint_files
    from comfy_llm_testworld.real_size import real_size_config
    from comfy_llm_testworld.shapes import qwen35_shape

    config = real_size_config("2b")
    shape = qwen35_shape("2b")
    tiny = json.loads(build_checkpoint_files("qwen3_5")["config.json"])
    for key in ("hidden_size", "num_hidden_layers", "layer_types", "vocab_size", "head_dim"):
        assert config["text_config"][key] == shape["text_config"][key]
    for key in ("depth", "hidden_size", "patch_size", "spatial_merge_size"):
        assert config["vision_config"][key] == shape["vision_config"][key]
    assert config["image_token_id"] == tiny["image_token_id"] != shape["image_token_id"]
    assert config["text_config"]["eos_token_id"] == tiny["text_config"]["eos_token_id"]
    # 256-wide heads, a quarter rotary: 32 frequencies over (t, h, w), as Qwen3.5's
    assert config["text_config"]["rope_parameters"]["mrope_section"] == [11, 11, 10]
    with pytest.raises(ValueError, match="27b-fp8"):
        real_size_config("27b-fp8")


@pytest.mark.slow
def test_the_real_size_stage_runs_its_path_on_the_cpu(tmp_path: Path) -> None:
    result = gpu_check_real.transformers_real_size(
        tmp_path, cuda=False, overrides=SMALL, sides=(64,), batches=(2,), tokens=4
    )
    row = result["captions"]["64px_batch2"]
    assert row["output_tokens"] == [4]  # forced length, every caption
    assert row["engine_batch_size"] == 2  # one generate for the batch
    assert row["captions_per_second"] > 0
    # the embedding and head alone: 2 x 248,320 x 128 in bfloat16
    assert result["checkpoint_bytes"] > 2 * 248_320 * 128 * 2
    assert result["estimate_bytes"] > result["weight_bytes"] > 0
    folder = tmp_path / "qwen3.5-2b-random"
    processor = json.loads((folder / "preprocessor_config.json").read_text())
    assert processor["patch_size"] == 16 and processor["size"]["longest_edge"] == 1024 * 1024


def test_the_vision_tower_ceiling_runs_on_the_cpu() -> None:
    result = gpu_check_real.vision_tower_ceilings(
        cuda=False, overrides=SMALL, sides=(64,), counts=(1, 2), repeat=1
    )
    assert result["parameters"] > 0
    for key in ("64px_x1", "64px_x2"):
        assert result[key]["ms_per_image"] > 0 and result[key]["linear_tflops"] > 0
