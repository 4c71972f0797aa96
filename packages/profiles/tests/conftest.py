"""Builders for config.json dicts and fake-Hub repositories used by the profiles tests.

Resolution never downloads weights, so the "weights" are a few bytes; only
their names and sizes matter (the fake Hub reports the real byte count).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

_QWEN3_5: dict[str, Any] = {
    "architectures": ["Qwen3_5ForConditionalGeneration"],
    "model_type": "qwen3_5",
    "image_token_id": 5,
    "video_token_id": 6,
    "text_config": {
        "model_type": "qwen3_5_text",
        "dtype": "bfloat16",
        "hidden_size": 64,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "layer_types": [
            "linear_attention",
            "linear_attention",
            "linear_attention",
            "full_attention",
        ],
        "full_attention_interval": 4,
        "max_position_embeddings": 262144,
        "vocab_size": 300,
    },
    "vision_config": {"model_type": "qwen3_5", "depth": 2, "hidden_size": 32},
}

_SMOLVLM: dict[str, Any] = {
    "architectures": ["SmolVLMForConditionalGeneration"],
    "model_type": "smolvlm",
    "torch_dtype": "bfloat16",
    "text_config": {
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "max_position_embeddings": 8192,
        "vocab_size": 300,
    },
    "vision_config": {"hidden_size": 32},
}

_MUSE: dict[str, Any] = {
    "architectures": ["MuseGlimmerForConditionalGeneration"],
    "model_type": "muse_glimmer",
    "torch_dtype": "bfloat16",
    "text_config": {"max_position_embeddings": 131072},
}

_IDEFICS3: dict[str, Any] = {
    **_SMOLVLM,
    "architectures": ["Idefics3ForConditionalGeneration"],
    "model_type": "idefics3",
}

_QWEN3_VL: dict[str, Any] = {
    "architectures": ["Qwen3VLForConditionalGeneration"],
    "model_type": "qwen3_vl",
    "image_token_id": 5,
    "video_token_id": 6,
    "text_config": {
        "model_type": "qwen3_vl_text",
        "dtype": "bfloat16",
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "max_position_embeddings": 262144,
        "vocab_size": 300,
    },
    "vision_config": {"model_type": "qwen3_vl", "depth": 2, "hidden_size": 32},
}


def _real(repository: str) -> dict[str, Any]:
    """The reconstructed config.json of a reviewed captioner checkpoint (issue 29)."""
    from comfy_llm_testworld._real_configs_a import CONFIGS_A
    from comfy_llm_testworld._real_configs_b import CONFIGS_B

    return dict({**CONFIGS_A, **CONFIGS_B}[repository]["config.json"])


#: Issue 29's families, by config builder name: the real repositories' configs.
REAL_REPOSITORIES = {
    "qwen2_vl": "Qwen/Qwen2-VL-2B-Instruct",
    "qwen2_5_vl": "Qwen/Qwen2.5-VL-3B-Instruct",
    "gemma3": "google/gemma-3-4b-it",
    "llava": "llava-hf/llava-1.5-7b-hf",
    "joycaption": "fancyfeast/llama-joycaption-beta-one-hf-llava",
    "llava_next": "llava-hf/llava-v1.6-mistral-7b-hf",
    "mllama": "meta-llama/Llama-3.2-11B-Vision-Instruct",
    "internvl": "OpenGVLab/InternVL3-2B-hf",
    "mistral3": "mistralai/Mistral-Small-3.1-24B-Instruct-2503",
    "glm4v": "zai-org/GLM-4.1V-9B-Thinking",
    "lfm2_vl": "LiquidAI/LFM2-VL-1.6B",
    "phi4_multimodal": "microsoft/Phi-4-multimodal-instruct",
    "florence2": "florence-community/Florence-2-base-ft",
}

# Config builders by name; "smolvlm" is SmolVLM2's architecture, "idefics3" SmolVLM v1's.
_FAMILIES = {
    "qwen3_5": _QWEN3_5,
    "qwen3_vl": _QWEN3_VL,
    "smolvlm": _SMOLVLM,
    "idefics3": _IDEFICS3,
    "muse_glimmer": _MUSE,
    **{name: _real(repository) for name, repository in REAL_REPOSITORIES.items()},
}

# The config builder that matches each registry family (curated entries name families).
CONFIG_FOR_FAMILY = {
    "qwen3_5": "qwen3_5",
    "qwen3_vl": "qwen3_vl",
    "smolvlm2": "smolvlm",
    "smolvlm": "idefics3",
    "muse_glimmer": "muse_glimmer",
    **{name: name for name in ("qwen2_vl", "gemma3", "llava", "llava_next", "mllama")},
    **{name: name for name in ("internvl", "mistral3", "glm4v", "lfm2_vl")},
}

ConfigFactory = Callable[..., dict[str, Any]]


def build_config(family: str = "qwen3_5", **top_level: Any) -> dict[str, Any]:
    """A config.json dict of ``family``; keyword arguments set top-level keys (None deletes)."""
    config = copy.deepcopy(_FAMILIES[family])
    for key, value in top_level.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    return config


def build_files(
    config: dict[str, Any] | None,
    *,
    weights: dict[str, bytes] | None = None,
    extra: dict[str, bytes] | None = None,
) -> dict[str, bytes]:
    """Repo files: config.json (unless None), weights (default one tiny safetensors), extras."""
    files: dict[str, bytes] = {}
    if config is not None:
        files["config.json"] = json.dumps(config).encode()
    files.update(
        {"model.safetensors": b"\x08\x00\x00\x00\x00\x00\x00\x00{}      "}
        if weights is None
        else weights
    )
    files["tokenizer.json"] = b"{}"
    files.update(extra or {})
    return files


@pytest.fixture
def make_config() -> ConfigFactory:
    """``make_config(family="qwen3_5", **top_level_overrides) -> dict``."""
    return build_config


@pytest.fixture
def make_files() -> Callable[..., dict[str, bytes]]:
    """``make_files(config, weights=None, extra=None) -> {path: bytes}``."""
    return build_files


def build_profile(**overrides: Any) -> Any:
    """A valid ModelProfile (local_cpu, transformers) with ``overrides`` applied."""
    from comfy_llm_core import ExecutionTarget
    from comfy_llm_profiles import ModelProfile
    from comfy_llm_profiles._profile import ProfileLimits

    fields: dict[str, Any] = {
        "repository": "owner/model",
        "revision": "0123456789abcdef0123456789abcdef01234567",
        "requested_revision": "main",
        "execution_target": ExecutionTarget.LOCAL_CPU,
        "backend": "transformers",
        "architecture": "SmolVLMForConditionalGeneration",
        "model_type": "smolvlm",
        "dtype": "bfloat16",
        "quantization_method": "none",
        "modalities": ("text", "image", "video", "file"),
        "limits": ProfileLimits.of(
            context_tokens=8192,
            max_images=4,
            max_video_frames=8,
            max_file_bytes=1024,
            max_total_file_bytes=2048,
            max_file_characters=4096,
            max_pdf_pages=10,
            allow_mixed_image_video=False,
        ),
        "reasoning_parser": "none",
        "backend_options": (("device", "cpu"), ("torch_dtype", "float32")),
        "estimated_memory_bytes": 123456789,
        "weight_bytes": 1000,
        "registry_version": "local_cpu/test",
        "display_name": "Owner Model",
        "advertised_context_tokens": 8192,
        "runtime_requirements": ("transformers==5.24.0",),
    }
    fields.update(overrides)
    return ModelProfile(**fields)


@pytest.fixture
def make_profile() -> Callable[..., Any]:
    """``make_profile(**overrides) -> ModelProfile``."""
    return build_profile
