"""Issue 29's families: engines per target, honest refusals, and memory against Transformers.

The configs are the reconstructions of the real repositories
(``comfy_llm_testworld.real_configs``). Transformers 5.24 (the locked
version, in the dev environment) is the oracle for which architectures are
built in, for the class defaults a config leaves out, and for the KV cache
its ``DynamicCache`` keeps.
"""

from __future__ import annotations

from typing import Any

import pytest
from comfy_llm_core import ExecutionTarget
from comfy_llm_profiles import decide, registry_for
from comfy_llm_profiles._config_defaults import TEXT_CONFIG_DEFAULTS, with_class_defaults
from comfy_llm_profiles._kv_cache import kv_cache_bytes
from comfy_llm_profiles._unreviewed import REFUSED, catalogue
from comfy_llm_profiles.errors import (
    RemoteCodeError,
    UnreviewedArchitectureError,
    UnsupportedArchitectureError,
)

from .conftest import build_config  # type: ignore[import-not-found]

SHA = "0123456789abcdef0123456789abcdef01234567"
GIB = 1024**3
ALL = frozenset({"mlx_vlm", "transformers", "vllm"})
CPU, CUDA, APPLE, MODAL = (
    ExecutionTarget.LOCAL_CPU,
    ExecutionTarget.LOCAL_CUDA,
    ExecutionTarget.LOCAL_APPLE,
    ExecutionTarget.MODAL,
)

# config builder -> (family, backend on local_cuda with vLLM, on local_apple, on local_cpu)
ENGINE_TABLE = {
    "qwen2_vl": ("qwen2_vl", "vllm", "mlx_vlm", "transformers"),
    "qwen2_5_vl": ("qwen2_vl", "vllm", "mlx_vlm", "transformers"),
    "gemma3": ("gemma3", "transformers", "mlx_vlm", "transformers"),
    "llava": ("llava", "vllm", None, "transformers"),
    "joycaption": ("llava", "vllm", None, "transformers"),
    "llava_next": ("llava_next", "vllm", "mlx_vlm", "transformers"),
    "mllama": ("mllama", "transformers", "mlx_vlm", "transformers"),
    "internvl": ("internvl", "vllm", None, "transformers"),
    "mistral3": ("mistral3", "vllm", "mlx_vlm", "transformers"),
    "glm4v": ("glm4v", "vllm", "mlx_vlm", "transformers"),
    "lfm2_vl": ("lfm2_vl", "transformers", "mlx_vlm", "transformers"),
}
# Why the Apple target refuses the families MLX-VLM 0.7.10 cannot run (a phrase).
APPLE_REASON = {
    "llava": "passes 'padding'",
    "joycaption": "passes 'padding'",
    "internvl": "Qwen3 text config",
}


def _decide(target: ExecutionTarget, config: dict[str, Any], **kwargs: Any) -> Any:
    kwargs.setdefault("backends", ALL)
    return decide(target, config, repository="o/m", revision=SHA, weight_bytes=3 * GIB, **kwargs)


@pytest.mark.parametrize("name", list(ENGINE_TABLE))
def test_each_family_runs_on_the_engines_its_review_marks(name: str) -> None:
    family, cuda, apple, cpu = ENGINE_TABLE[name]
    config = build_config(name)
    for target, backend in ((CUDA, cuda), (MODAL, cuda), (CPU, cpu)):
        decision = _decide(target, config)
        assert (decision.family, decision.backend) == (family, backend), target
    # without vLLM installed, local_cuda falls back on Transformers
    assert _decide(CUDA, config, backends={"transformers"}).backend == "transformers"
    if apple is not None:
        assert _decide(APPLE, config).backend == apple
        return
    with pytest.raises(UnsupportedArchitectureError) as caught:
        _decide(APPLE, config)
    message = str(caught.value)
    assert "reviewed, but not for this machine" in message
    assert APPLE_REASON[name] in message and "local_cuda" in message


def test_one_image_families_and_video_families() -> None:
    for name in ("llava", "joycaption", "mllama"):
        assert _decide(MODAL, build_config(name)).limits.media.image.max_images == 1
    for name in ("qwen2_5_vl", "internvl", "glm4v"):
        decision = _decide(MODAL, build_config(name))
        assert "video" in decision.modalities and decision.limits.media.video.max_video_frames > 0
    for name in ("gemma3", "llava", "llava_next", "mllama", "mistral3", "lfm2_vl"):
        decision = _decide(MODAL, build_config(name))
        assert "video" not in decision.modalities
        assert decision.limits.media.video.max_video_frames == 0
    # GLM-4.1V thinks: its <think> block goes to the reasoning output
    assert _decide(CPU, build_config("glm4v")).reasoning_parser == "qwen3"


def test_gemma3_context_comes_from_its_config_class() -> None:
    # text_config has no max_position_embeddings: the class says 131072, capped to 32768
    assert _decide(MODAL, build_config("gemma3")).limits.context_tokens == 32768
    assert _decide(MODAL, build_config("gemma3")).advertised_context_tokens == 131072


@pytest.mark.parametrize("name", ["phi4_multimodal", "florence2"])
def test_reviewed_but_refused_families_name_the_blocker(name: str) -> None:
    for target in ExecutionTarget:
        with pytest.raises(UnreviewedArchitectureError) as caught:
            _decide(target, build_config(name))
        assert caught.value.reason == REFUSED[caught.value.architecture]
        assert "It was reviewed and is refused" in str(caught.value)
        assert "remote code" not in str(caught.value)


def _transformers_names(mapping: dict[str, Any]) -> set[str]:
    names: set[str] = set()
    for value in mapping.values():
        names.update([value] if isinstance(value, str) else value)
    return names


def test_the_catalogue_is_the_locked_transformers_auto_mappings() -> None:
    import transformers
    from transformers.models.auto import modeling_auto as auto

    data = catalogue()
    assert data["transformers"] == transformers.__version__
    image_text = _transformers_names(auto.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES)
    multimodal = _transformers_names(auto.MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES) - image_text
    causal = _transformers_names(auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES) - image_text - multimodal
    assert set(data["image_text_to_text"]) == image_text  # type: ignore[arg-type]
    assert set(data["multimodal_lm"]) == multimodal  # type: ignore[arg-type]
    assert set(data["causal_lm"]) == causal  # type: ignore[arg-type]


def test_every_transformers_image_text_architecture_is_reviewed_or_not_reviewed_yet() -> None:
    """Never "remote code" for an architecture Transformers builds in (issue 29, item 4)."""
    from transformers.models.auto import modeling_auto as auto

    names = _transformers_names(auto.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES)
    names |= _transformers_names(auto.MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES)
    reviewed = not_yet = 0
    for architecture in sorted(names):
        config = build_config("smolvlm", architectures=[architecture])
        accepted = False
        for target in ExecutionTarget:
            rule = registry_for(target).rule_for(architecture)
            config["model_type"] = rule.model_type_for(architecture) if rule else "x"
            try:
                _decide(target, config)
                accepted = True
            except UnsupportedArchitectureError:
                continue
            except UnreviewedArchitectureError as error:
                assert error.architecture == architecture
                wording = "not reviewed yet" if architecture not in REFUSED else "is refused"
                assert wording in str(error) and "remote code" not in str(error)
                not_yet += 1
                break
        reviewed += accepted
    assert reviewed >= 15 and not_yet + reviewed == len(names)


def test_a_custom_architecture_still_needs_remote_code() -> None:
    with pytest.raises(RemoteCodeError, match="built into no engine"):
        _decide(MODAL, build_config("smolvlm", architectures=["MyVLM"], model_type="my"))


def test_class_defaults_are_the_locked_transformers_values() -> None:
    import transformers

    for model_type, defaults in TEXT_CONFIG_DEFAULTS.items():
        instance = transformers.AutoConfig.for_model(model_type)
        for key, value in defaults.items():
            if key == "sliding_window_pattern":  # Gemma 3 spells it out as layer_types
                full = [
                    i for i, kind in enumerate(instance.layer_types) if kind == "full_attention"
                ]
                assert full == list(range(value - 1, instance.num_hidden_layers, value))  # type: ignore[operator]
                continue
            assert getattr(instance, key, None) == value, (model_type, key)


def _transformers_kv(config: dict[str, Any], tokens: int) -> int:
    """Self-attention KV bytes (2-byte elements) of Transformers' DynamicCache after ``tokens``."""
    import transformers
    from transformers.cache_utils import get_layer_types_and_kwargs

    built = transformers.AutoConfig.for_model(
        config["model_type"],
        **{k: v for k, v in config.items() if k not in ("model_type", "architectures")},
    )
    text = built.get_text_config(decoder=True)
    layer_types, options = get_layer_types_and_kwargs(text)
    heads = text.num_attention_heads
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // heads
    per_token = 2 * kv_heads * head_dim * 2
    cross = set(getattr(text, "cross_attention_layers", None) or ())
    total = 0
    for index, (kind, option) in enumerate(zip(layer_types, options, strict=True)):
        if index in cross or kind == "conv":
            continue
        if kind in ("sliding_attention", "chunked_attention"):
            total += per_token * min(tokens, int(option["sliding_window"]))
        else:
            total += per_token * tokens
    return total


@pytest.mark.parametrize("name", list(ENGINE_TABLE))
def test_kv_term_matches_what_transformers_keeps(name: str) -> None:
    config = build_config(name)
    tokens = _decide(MODAL, config).limits.context_tokens
    ours = kv_cache_bytes(with_class_defaults(config), tokens, 2)
    theirs = _transformers_kv(config, tokens)
    assert theirs > 0
    # Exact, except Llama 3.2 Vision's 8 cross-attention layers, counted at the context
    # (they cache one image's tiles: a safe overestimate).
    assert ours == theirs or (name == "mllama" and theirs < ours <= 1.25 * theirs), (ours, theirs)


CAPTIONER_IDS = {
    "qwen2.5-vl-3b-instruct": ("qwen2_vl", True),
    "qwen2-vl-2b-instruct": ("qwen2_vl", True),
    "gemma-3-4b-it": ("gemma3", False),
    "llava-1.5-7b": ("llava", False),
    "llava-v1.6-mistral-7b": ("llava_next", False),
    "llama-3.2-11b-vision-instruct": ("mllama", False),
    "internvl3-2b": ("internvl", True),
    "mistral-small-3.1-24b-instruct": ("mistral3", False),
}


@pytest.mark.parametrize("curated_id", list(CAPTIONER_IDS))
def test_curated_captioners_resolve_from_the_real_configs(
    hf_env: Any, tmp_path: Any, curated_id: str
) -> None:
    """Each pinned id resolves, on every target it lists, from its real repository's files."""
    from comfy_llm_profiles import load_curated_registry, resolve_profile
    from comfy_llm_testworld.real_configs import REAL_CHECKPOINTS, serve_real_checkpoint

    entry = load_curated_registry().get(curated_id)
    family, video = CAPTIONER_IDS[curated_id]
    assert entry.family == family
    assert serve_real_checkpoint(hf_env, entry.repository) == entry.revision
    token = "hf_test_token" if REAL_CHECKPOINTS[entry.repository].gated else None
    for target in entry.targets:
        profile = resolve_profile(
            curated_id,
            target,
            storage_root=tmp_path,
            endpoint=hf_env.endpoint,
            token=token,
            backends={"transformers", "mlx_vlm"},
        ).profile
        assert (profile.repository, profile.revision) == (entry.repository, entry.revision)
        assert profile.weight_bytes == REAL_CHECKPOINTS[entry.repository].weight_bytes
        assert ("video" in profile.modalities) is video
