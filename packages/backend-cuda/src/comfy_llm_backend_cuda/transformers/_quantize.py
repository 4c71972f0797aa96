"""Quantizing at load with bitsandbytes: the ``BitsAndBytesConfig`` of a ``bnb_*`` profile.

A profile resolved from ``owner/model:nf4`` or ``:int8`` names its load
quantization as its ``quantization_method`` (profiles' ``_load_quantization``);
Transformers replaces every ``nn.Linear`` but the output embedding with a
bitsandbytes layer while the weights load. bitsandbytes 0.50 runs both on
CUDA and on the CPU (``bench/bench_bnb_cpu.py``), so the model goes to the
plan's one device through ``device_map`` (its quantizers place the weights
themselves, with accelerate).

The 4-bit compute dtype is the plan's dtype (float32 on the CPU, the
checkpoint's 16-bit dtype on CUDA), so the layers that stay unconverted and
the NF4 matmuls run in the same dtype as the unquantized model would.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from comfy_llm_profiles import ModelProfile

from ..errors import QuantizationNotInstalledError
from ._engine import DevicePlan

__all__ = [
    "batches_like_single_runs",
    "keep_unaligned_nf4_off_the_packed_cpu_path",
    "quantization_arguments",
    "quantization_report",
]

_LAYERS = ("Linear4bit", "Linear8bitLt")
#: Rows of one block of bitsandbytes' packed CPU NF4 weight (``block_n``).
_PACK_ROWS = 32


def batches_like_single_runs(profile: ModelProfile) -> bool:
    """False for LLM.int8(): its outlier columns are chosen over every row of a batch.

    ``MatMul8bitLt.forward`` (bitsandbytes 0.50.2 ``autograd/_functions.py``
    134-140, 157-167) flattens the batch's rows into one matrix, takes the
    columns where any row passes ``llm_int8_threshold`` (6.0) and multiplies
    those in float16: a row's answer depends on its batch-mates, so a batch
    would not equal the single runs. NF4 dequantizes the weights only
    (per-row arithmetic as unquantized).
    """
    quantization = profile.load_quantization
    return quantization is None or quantization.bits != 8


def _import(profile: ModelProfile) -> None:
    """Import what Transformers' bitsandbytes quantizers need (``quantizer_bnb_4bit``'s checks)."""
    quantization = profile.load_quantization
    assert quantization is not None
    try:
        import accelerate  # noqa: F401
        import bitsandbytes  # noqa: F401
    except ImportError as error:
        module = error.name or quantization.library
        raise QuantizationNotInstalledError(
            profile.profile_id, quantization.name, module, quantization.extra, str(error)
        ) from error


def quantization_arguments(
    profile: ModelProfile, torch: ModuleType, transformers: ModuleType, plan: DevicePlan
) -> dict[str, Any]:
    """``from_pretrained`` keywords that quantize this profile's model as it loads.

    Empty for an unquantized profile.

    Raises:
        QuantizationNotInstalledError: bitsandbytes or accelerate is missing
            (names the ``bitsandbytes`` extra).
    """
    quantization = profile.load_quantization
    if quantization is None:
        return {}
    _import(profile)
    dtype = plan.torch_dtype(torch)
    compute = dtype if dtype != "auto" else torch.float16
    if quantization.bits == 4:
        config = transformers.BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=compute
        )
    else:
        config = transformers.BitsAndBytesConfig(load_in_8bit=True)
    return {"quantization_config": config, "device_map": {"": plan.device}}


def keep_unaligned_nf4_off_the_packed_cpu_path(model: Any) -> int:
    """Send NF4 layers the packed CPU kernel cannot take to the plain CPU kernel.

    On a CPU with AVX512-BF16, bitsandbytes 0.50.2 repacks an NF4 weight at its
    first CPU forward (``nn/modules.py`` 613-620, ``Linear4bit.forward``;
    ``functional.py`` 1676-1727, ``_convert_weight_packed_for_cpu``), which
    asserts ``out_features`` a multiple of its 32-row block and reshapes the
    block scales to ``(out, in // blocksize)``: an ``in_features`` that is not
    a multiple of the 64-wide block leaves more scales than that shape holds,
    and the forward raises. SigLIP's 4304-wide MLP (Gemma 3, Qwen3.5-27B's
    vision tower) is such a layer. The plain CPU path, taken on every CPU
    without AVX512-BF16, handles any shape; the layers that need it are sent
    there, the others keep the fast path.

    Returns:
        How many layers were sent to the plain path.
    """
    sent = 0
    for module in model.modules():
        if type(module).__name__ != "Linear4bit":
            continue
        state = getattr(module.weight, "quant_state", None)
        blocksize = int(getattr(state, "blocksize", 64) or 64)
        packable = module.in_features % blocksize == 0 and module.out_features % _PACK_ROWS == 0
        if not packable and getattr(module, "support_avx512bf16_for_cpu", False):
            module.support_avx512bf16_for_cpu = False
            sent += 1
    return sent


def quantization_report(profile: ModelProfile, model: Any) -> dict[str, object]:
    """What ran: ``quantization_method``, and for a load quantization more.

    Its label, library, how many linear layers it converted, and the weights'
    bytes as loaded (``get_memory_footprint``).
    """
    report: dict[str, object] = {"quantization_method": profile.quantization_method}
    quantization = profile.load_quantization
    if quantization is None or model is None:
        return report
    import bitsandbytes

    converted = sum(type(m).__name__ in _LAYERS for m in model.modules())
    report |= {
        "quantization": quantization.label,
        "quantization_library": f"bitsandbytes {bitsandbytes.__version__}",
        "quantized_linear_layers": int(converted),
        "weight_memory_bytes": int(model.get_memory_footprint()),
    }
    return report
