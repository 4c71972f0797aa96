"""Detecting a checkpoint's quantization format from config.json alone.

The format decides which backend can load the weights at all (MLX cannot
run FP8 or NVFP4 kernels; CUDA backends cannot read MLX group-quantized
tensors), so it is read before any weight byte is downloaded. Only formats
that were reviewed get a name; everything else is ``unknown`` and every
registry refuses it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["QuantizationInfo", "detect_quantization"]


@dataclass(frozen=True, slots=True)
class QuantizationInfo:
    """The detected quantization of a checkpoint.

    Attributes:
        method: ``none``, ``mlx``, ``fp8`` (block-FP8), ``modelopt_fp4``
            (ModelOpt NVFP4) or ``unknown``.
        description: Human detail, e.g. ``mlx 4-bit, group 64`` or, for
            unknown formats, what config.json declared.
    """

    method: str
    description: str

    @property
    def known(self) -> bool:
        """False when no registry can accept the format."""
        return self.method != "unknown"


def _mlx(config: Mapping[str, Any]) -> QuantizationInfo | None:
    # mlx-community conversions write {"group_size", "bits"} at the top level
    # (and often mirror it, without quant_method, in quantization_config).
    quant = config.get("quantization")
    if isinstance(quant, Mapping) and "bits" in quant and "group_size" in quant:
        return QuantizationInfo("mlx", f"mlx {quant['bits']}-bit, group {quant['group_size']}")
    return None


def _modelopt_algo(qconfig: Mapping[str, Any]) -> str:
    algo = qconfig.get("quant_algo")
    nested = qconfig.get("quantization")
    if algo is None and isinstance(nested, Mapping):
        algo = nested.get("quant_algo")
    return str(algo or "").upper()


def _declared(qconfig: object) -> object:
    """``quantization_config``, with an empty object (an unquantized checkpoint) as None."""
    if isinstance(qconfig, Mapping) and not qconfig:
        return None
    return qconfig


def detect_quantization(config: Mapping[str, Any]) -> QuantizationInfo:
    """Classify the quantization declared by a config.json.

    Args:
        config: The parsed config.json.

    Returns:
        The detected format; ``unknown`` for anything not reviewed (AWQ,
        GPTQ, bitsandbytes, per-tensor FP8, ModelOpt FP8, ...).
    """
    mlx = _mlx(config)
    if mlx is not None:
        return mlx
    qconfig = _declared(config.get("quantization_config"))
    if qconfig is None:
        text_config = config.get("text_config")
        if isinstance(text_config, Mapping):
            qconfig = _declared(text_config.get("quantization_config"))
    if qconfig is None:
        return QuantizationInfo("none", "unquantized")
    if not isinstance(qconfig, Mapping):
        return QuantizationInfo("unknown", f"quantization_config is {type(qconfig).__name__}")
    method = str(qconfig.get("quant_method", "")).lower()
    if method == "fp8":
        block = qconfig.get("weight_block_size")
        if isinstance(block, list | tuple) and len(block) == 2:
            return QuantizationInfo("fp8", f"block FP8 {block[0]}x{block[1]}")
        return QuantizationInfo("unknown", "fp8 without weight_block_size (per-tensor FP8)")
    if method == "modelopt":
        algo = _modelopt_algo(qconfig)
        if algo == "NVFP4":
            return QuantizationInfo("modelopt_fp4", "ModelOpt NVFP4")
        return QuantizationInfo("unknown", f"modelopt {algo or 'without quant_algo'}")
    if not method:
        return QuantizationInfo("unknown", "quantization_config without quant_method")
    return QuantizationInfo("unknown", method)
