"""Quantized at load (``owner/model:nf4``, ``:int8``): reference, choice, price, refusals."""

from __future__ import annotations

from typing import Any

import pytest
from comfy_llm_core import ExecutionTarget
from comfy_llm_profiles import decide, parse_reference
from comfy_llm_profiles._resolve_gguf import is_hub_gguf
from comfy_llm_profiles.errors import UnsupportedQuantizationError
from comfy_llm_residency.errors import InsufficientMemoryError
from comfy_llm_testworld._real_configs_a import LLAVA_15_7B

from .conftest import build_config  # type: ignore[import-not-found]

SHA = "0123456789abcdef0123456789abcdef01234567"
GIB = 1024**3
CUDA, CPU = ExecutionTarget.LOCAL_CUDA, ExecutionTarget.LOCAL_CPU
LLAVA_7B_BYTES = 14_130_000_000
"""llava-hf/llava-1.5-7b-hf's safetensors: ~7.06 B parameters in float16."""


def _decide(target: ExecutionTarget, config: dict[str, Any], **kwargs: Any) -> Any:
    kwargs.setdefault("weight_bytes", 3 * GIB)
    kwargs.setdefault("backends", {"mlx_vlm", "transformers", "vllm"})
    return decide(target, config, repository="owner/model", revision=SHA, **kwargs)


@pytest.mark.parametrize(
    ("text", "repository", "curated", "tag"),
    [
        ("owner/model:nf4", "owner/model", None, "nf4"),
        ("owner/model@main:INT8", "owner/model", None, "INT8"),
        ("smolvlm-256m-instruct:nf4", None, "smolvlm-256m-instruct", "nf4"),
    ],
)
def test_a_reference_asks_for_it_after_a_colon(
    text: str, repository: str | None, curated: str | None, tag: str
) -> None:
    ref = parse_reference(text)
    assert (ref.repository, ref.curated_id, ref.quantization) == (repository, curated, tag)
    assert str(ref) == text
    assert not is_hub_gguf(ref)  # a safetensors repository, quantized as it loads


def test_gguf_tags_and_gguf_repositories_stay_gguf() -> None:
    assert is_hub_gguf(parse_reference("owner/model-GGUF:Q8_0"))
    assert is_hub_gguf(parse_reference("owner/model:Q4_K_M"))
    assert is_hub_gguf(parse_reference("owner/model-GGUF:nf4"))  # the GGUF offer decides
    with pytest.raises(ValueError, match="not accepted"):
        parse_reference("smolvlm-256m-instruct:Q8_0")  # a curated id takes nf4/int8 only


def test_vllm_first_families_get_transformers_and_a_profile_of_their_own() -> None:
    config = build_config("qwen3_5")
    plain = _decide(CUDA, config)
    nf4 = _decide(CUDA, config, load_quantization="bnb_nf4")
    int8 = _decide(CUDA, config, load_quantization="bnb_int8")
    assert plain.backend == "vllm"
    assert nf4.backend == int8.backend == "transformers"
    assert (nf4.quantization.method, int8.quantization.method) == ("bnb_nf4", "bnb_int8")
    ids = {d.to_profile("owner/model", SHA).profile_id for d in (plain, nf4, int8)}
    assert len(ids) == 3
    unquantized = _decide(CUDA, config, backends={"transformers"})
    assert (
        nf4.estimated_memory_bytes
        < int8.estimated_memory_bytes
        < unquantized.estimated_memory_bytes
    )


def test_nf4_lets_a_7b_llava_onto_a_12_gib_card_where_float16_is_refused() -> None:
    """The issue's user: a 12 GB card, a 7B captioner, through residency's own admission."""
    from comfy_llm_residency._admission import Admission, AdmissionRequest
    from comfy_llm_testworld._modal_probe import FixedMemoryProbe

    config = LLAVA_15_7B["config.json"]
    card = FixedMemoryProbe(total_bytes=12 * GIB, available_bytes=int(11.5 * GIB))

    def admit(load: str | None) -> Any:
        decision = _decide(
            CUDA,
            config,
            weight_bytes=LLAVA_7B_BYTES,
            backends={"transformers"},
            load_quantization=load,
        )
        admission = Admission(
            probe=card,
            evict_one=lambda: None,
            free_host_memory=None,
            timeout_seconds=0,
            poll_interval_seconds=0,
            clock=lambda: 0.0,
            sleep=lambda seconds: None,
            progress=lambda event: None,
        )
        request = AdmissionRequest(
            profile_id=str(load),
            repository="llava-hf/llava-1.5-7b-hf",
            needed_bytes=decision.estimated_memory_bytes,
            reserve_bytes=GIB // 2,
            reserve_name="local_reserve_free_memory_gb",
        )
        return decision.estimated_memory_bytes, admission.run(request)

    with pytest.raises(InsufficientMemoryError) as refused:
        admit(None)
    assert refused.value.needed_bytes > 16 * GIB  # float16 weights x 1.15 + KV + activations
    needed, outcome = admit("bnb_nf4")
    assert outcome.snapshot.available_bytes >= needed + GIB // 2
    # NF4's weights: embeddings and lm_head (2 x 32064 x 4096) at 2 bytes, the rest at
    # 0.5625 (x 1.15), plus the 4096-token KV (2 GiB) and 1.5 GiB of activations
    assert 7 * GIB < needed < 9 * GIB
    # 8-bit needs ~11.4 GiB: a 16 GB card's choice, refused here with the numbers
    with pytest.raises(InsufficientMemoryError) as int8:
        admit("bnb_int8")
    assert needed < int8.value.needed_bytes < refused.value.needed_bytes


@pytest.mark.parametrize(
    ("target", "says"),
    [
        (ExecutionTarget.LOCAL_APPLE, "mlx-community"),
        (ExecutionTarget.MODAL, "Modal image does not carry bitsandbytes"),
    ],
)
def test_targets_without_bitsandbytes_refuse_it_with_the_fix(
    target: ExecutionTarget, says: str
) -> None:
    with pytest.raises(UnsupportedQuantizationError) as caught:
        _decide(target, build_config("smolvlm"), load_quantization="bnb_nf4")
    message = str(caught.value)
    assert "bitsandbytes 4-bit NF4 (':nf4')" in message and repr(target.value) in message
    assert says in message and "(quantizations applied at load here: none)" in message
    assert caught.value.quantization == "nf4" and caught.value.allowed == ()


def test_a_quantized_checkpoint_is_not_quantized_again() -> None:
    config = build_config("qwen3_5")
    config["quantization_config"] = {"quant_method": "fp8", "weight_block_size": [128, 128]}
    with pytest.raises(UnsupportedQuantizationError) as caught:
        _decide(CUDA, config, load_quantization="bnb_int8")
    message = str(caught.value)
    assert "already quantized (block FP8 128x128)" in message
    assert "Drop ':int8'" in message and "int8, nf4" in message


def test_the_cpu_prices_unconverted_layers_in_float32() -> None:
    config = build_config("smolvlm")
    on_cpu = _decide(CPU, config, load_quantization="bnb_int8")
    on_gpu = _decide(CUDA, config, load_quantization="bnb_int8", backends={"transformers"})
    assert on_cpu.backend == on_gpu.backend == "transformers"
    cpu_weights = dict(on_cpu.backend_options)
    assert cpu_weights["torch_dtype"] == "float32" and cpu_weights["device"] == "cpu"
