from __future__ import annotations

from typing import Any

import pytest
from comfy_llm_profiles._quantization import QuantizationInfo, detect_quantization

BLOCK_FP8 = {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}
NVFP4 = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16}


@pytest.mark.parametrize(
    ("config", "method"),
    [
        ({}, "none"),
        ({"quantization_config": BLOCK_FP8}, "fp8"),
        ({"quantization_config": {**BLOCK_FP8, "quant_method": "FP8"}}, "fp8"),
        ({"text_config": {"quantization_config": BLOCK_FP8}}, "fp8"),
        ({"quantization_config": NVFP4}, "modelopt_fp4"),
        (
            {
                "quantization_config": {
                    "quant_method": "modelopt",
                    "quantization": {"quant_algo": "nvfp4"},
                }
            },
            "modelopt_fp4",
        ),
        # mlx-community conversions: top level, often mirrored without quant_method.
        ({"quantization": {"group_size": 64, "bits": 4}}, "mlx"),
        (
            {
                "quantization": {"group_size": 64, "bits": 8},
                "quantization_config": {"group_size": 64, "bits": 8},
            },
            "mlx",
        ),
    ],
)
def test_known_formats(config: dict[str, Any], method: str) -> None:
    info = detect_quantization(config)
    assert info.method == method
    assert info.known


@pytest.mark.parametrize(
    ("qconfig", "detail"),
    [
        ({"quant_method": "fp8"}, "per-tensor"),
        ({"quant_method": "fp8", "weight_block_size": 128}, "per-tensor"),
        ({"quant_method": "modelopt", "quant_algo": "FP8"}, "modelopt FP8"),
        ({"quant_method": "modelopt"}, "without quant_algo"),
        ({"quant_method": "awq", "bits": 4}, "awq"),
        ({"quant_method": "gptq"}, "gptq"),
        ({"quant_method": "bitsandbytes", "load_in_4bit": True}, "bitsandbytes"),
        ({"quant_method": "compressed-tensors"}, "compressed-tensors"),
        ({"bits": 4}, "without quant_method"),
        ("fp8", "str"),
    ],
)
def test_unknown_formats(qconfig: object, detail: str) -> None:
    info = detect_quantization({"quantization_config": qconfig})
    assert info.method == "unknown"
    assert not info.known
    assert detail in info.description


def test_description_of_mlx() -> None:
    assert detect_quantization({"quantization": {"group_size": 32, "bits": 4}}) == QuantizationInfo(
        "mlx", "mlx 4-bit, group 32"
    )


def test_incomplete_mlx_block_is_not_mlx() -> None:
    assert detect_quantization({"quantization": {"bits": 4}}).method == "none"


@pytest.mark.parametrize(
    "config",
    [
        {"quantization_config": {}},
        {"text_config": {"quantization_config": {}}},
        {"quantization_config": {}, "text_config": {"quantization_config": {}}},
    ],
)
def test_an_empty_quantization_config_is_unquantized(config: dict[str, Any]) -> None:
    assert detect_quantization(config) == QuantizationInfo("none", "unquantized")


def test_an_empty_top_level_config_does_not_hide_a_text_config_one() -> None:
    config = {"quantization_config": {}, "text_config": {"quantization_config": BLOCK_FP8}}
    assert detect_quantization(config).method == "fp8"


def test_an_unquantized_checkpoint_with_an_empty_config_resolves(
    make_config: Any,
) -> None:
    from comfy_llm_profiles import decide

    decision = decide("local_cpu", make_config(quantization_config={}), weight_bytes=1)
    assert (decision.backend, decision.quantization.method) == ("transformers", "none")
