from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable
from typing import Any

import pytest
from comfy_llm_core import ExecutionTarget, install_command
from comfy_llm_profiles import ENGINES, available_backends, decide, registry_for
from comfy_llm_profiles._families import FAMILIES
from comfy_llm_profiles._registry import REGISTRY_VERSIONS, known_architectures
from comfy_llm_profiles.errors import (
    InvalidConfigError,
    ModelRejectedError,
    RemoteCodeError,
    UnsupportedArchitectureError,
    UnsupportedQuantizationError,
)

ConfigFactory = Callable[..., dict[str, Any]]

ALL = frozenset(ENGINES)
NO_VLLM = ALL - {"vllm"}
APPLE, CUDA, CPU, MODAL = (
    ExecutionTarget.LOCAL_APPLE,
    ExecutionTarget.LOCAL_CUDA,
    ExecutionTarget.LOCAL_CPU,
    ExecutionTarget.MODAL,
)
BLOCK_FP8 = {"quant_method": "fp8", "weight_block_size": [128, 128]}
NVFP4 = {"quant_method": "modelopt", "quant_algo": "NVFP4"}
MLX_4BIT = {"group_size": 64, "bits": 4}
SHA = "0123456789abcdef0123456789abcdef01234567"


def _decide(
    target: ExecutionTarget,
    config: dict[str, Any],
    backends: frozenset[str] = ALL,
    weight_bytes: int = 1000,
) -> Any:
    return decide(
        target,
        config,
        weight_bytes=weight_bytes,
        repository="owner/model",
        revision=SHA,
        backends=backends,
    )


@pytest.mark.parametrize(
    ("target", "family", "backend", "parser"),
    [
        (APPLE, "qwen3_5", "mlx_vlm", "qwen3"),
        (APPLE, "smolvlm", "mlx_vlm", "none"),
        (APPLE, "muse_glimmer", "mlx_vlm", "none"),
        (MODAL, "qwen3_5", "vllm", "qwen3"),
        (MODAL, "smolvlm", "transformers", "none"),
        (MODAL, "muse_glimmer", "transformers", "none"),
        (CUDA, "qwen3_5", "vllm", "qwen3"),
        (CUDA, "smolvlm", "transformers", "none"),
        (CUDA, "muse_glimmer", "transformers", "none"),
        (CPU, "qwen3_5", "transformers", "qwen3"),
        (CPU, "smolvlm", "transformers", "none"),
        (CPU, "muse_glimmer", "transformers", "none"),
    ],
)
def test_unquantized_decisions(
    make_config: ConfigFactory, target: ExecutionTarget, family: str, backend: str, parser: str
) -> None:
    decision = _decide(target, make_config(family))
    assert decision.backend == backend
    assert decision.reasoning_parser == parser
    assert decision.modalities == FAMILIES[decision.family].modalities
    assert decision.quantization.method == "none"
    assert decision.registry_version == REGISTRY_VERSIONS[target]
    assert decision.dtype == "bfloat16"
    assert ("trust_remote_code", False) in decision.backend_options
    profile = decision.to_profile("owner/model", SHA, requested_revision="main")
    assert profile.execution_target is target
    assert profile.backend == backend
    assert profile.display_name == "owner/model"


def test_idefics3_smolvlm_and_qwen_moe_are_known(make_config: ConfigFactory) -> None:
    idefics = make_config(
        "smolvlm", architectures=["Idefics3ForConditionalGeneration"], model_type="idefics3"
    )
    assert _decide(MODAL, idefics).architecture == "Idefics3ForConditionalGeneration"
    moe = make_config(
        architectures=["Qwen3_5MoeForConditionalGeneration"], model_type="qwen3_5_moe"
    )
    assert _decide(MODAL, moe).backend == "vllm"
    assert _decide(APPLE, moe).backend == "mlx_vlm"
    assert known_architectures() == {
        "Qwen3_5ForConditionalGeneration",
        "Qwen3_5MoeForConditionalGeneration",
        "Qwen3VLForConditionalGeneration",
        "Qwen3VLMoeForConditionalGeneration",
        "SmolVLMForConditionalGeneration",
        "Idefics3ForConditionalGeneration",
        "MuseGlimmerForConditionalGeneration",
        "Qwen2VLForConditionalGeneration",
        "Qwen2_5_VLForConditionalGeneration",
        "Gemma3ForConditionalGeneration",
        "LlavaForConditionalGeneration",
        "LlavaNextForConditionalGeneration",
        "MllamaForConditionalGeneration",
        "InternVLForConditionalGeneration",
        "Mistral3ForConditionalGeneration",
        "Glm4vForConditionalGeneration",
        "Lfm2VlForConditionalGeneration",
    }


@pytest.mark.parametrize("target", [MODAL, CUDA])
@pytest.mark.parametrize(("qconfig", "method"), [(BLOCK_FP8, "fp8"), (NVFP4, "modelopt_fp4")])
def test_cuda_targets_run_quantized_qwen_on_vllm(
    make_config: ConfigFactory, target: ExecutionTarget, qconfig: dict[str, Any], method: str
) -> None:
    decision = _decide(target, make_config(quantization_config=qconfig))
    assert decision.backend == "vllm"
    assert decision.quantization.method == method
    options = dict(decision.backend_options)
    assert options["quantization"] == method
    assert options["max_model_len"] == decision.limits.context_tokens == 32768


def test_local_cuda_without_vllm_uses_transformers_and_refuses_fp8(
    make_config: ConfigFactory,
) -> None:
    assert _decide(CUDA, make_config(), backends=NO_VLLM).backend == "transformers"
    with pytest.raises(UnsupportedQuantizationError) as caught:
        _decide(CUDA, make_config(quantization_config=BLOCK_FP8), backends=NO_VLLM)
    assert caught.value.allowed == ("none",)
    assert install_command("vllm") in str(caught.value)


def test_available_backends_only_local_cuda_depends_on_vllm(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.util.find_spec
    installed = {"vllm": False}

    def fake_find_spec(name: str, *args: Any) -> Any:
        if name == "vllm":
            return object() if installed["vllm"] else None
        return real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", fake_find_spec)
    assert available_backends(CUDA) == NO_VLLM
    assert available_backends(MODAL) == ALL
    assert available_backends(CPU) == ALL
    installed["vllm"] = True
    assert available_backends(CUDA) == ALL


@pytest.mark.parametrize(
    ("config_changes", "quantization"),
    [
        ({"quantization_config": BLOCK_FP8}, "fp8"),
        ({"quantization_config": NVFP4}, "modelopt_fp4"),
        ({"quantization_config": {"quant_method": "awq"}}, "unknown (awq)"),
    ],
)
def test_apple_refuses_cuda_formats_with_advice(
    make_config: ConfigFactory, config_changes: dict[str, Any], quantization: str
) -> None:
    with pytest.raises(UnsupportedQuantizationError) as caught:
        _decide(APPLE, make_config(**config_changes))
    error = caught.value
    assert error.quantization == quantization
    assert error.allowed == ("mlx", "none")
    assert (error.repository, error.revision, error.target) == ("owner/model", SHA, "local_apple")
    message = str(error)
    assert "owner/model" in message and "local_apple" in message
    assert "unquantized" in message and "mlx-community" in message


def test_apple_accepts_mlx_conversions(make_config: ConfigFactory) -> None:
    decision = _decide(APPLE, make_config(quantization=MLX_4BIT))
    assert decision.quantization.method == "mlx"
    assert dict(decision.backend_options)["thinking_budget_fraction"] == 0.5


@pytest.mark.parametrize("target", [MODAL, CUDA, CPU])
def test_mlx_conversions_run_only_on_apple(
    make_config: ConfigFactory, target: ExecutionTarget
) -> None:
    with pytest.raises(UnsupportedQuantizationError, match=r"MLX conversions|only unquantized"):
        _decide(target, make_config(quantization=MLX_4BIT))


@pytest.mark.parametrize("qconfig", [BLOCK_FP8, NVFP4])
def test_cpu_refuses_every_quantization(
    make_config: ConfigFactory, qconfig: dict[str, Any]
) -> None:
    with pytest.raises(UnsupportedQuantizationError, match="only unquantized"):
        _decide(CPU, make_config(quantization_config=qconfig))


@pytest.mark.parametrize("family", ["smolvlm", "muse_glimmer"])
def test_transformers_families_refuse_fp8_on_gpu(make_config: ConfigFactory, family: str) -> None:
    with pytest.raises(UnsupportedQuantizationError) as caught:
        _decide(MODAL, make_config(family, quantization_config=BLOCK_FP8))
    assert caught.value.allowed == ("none",)


@pytest.mark.parametrize("target", list(ExecutionTarget))
def test_unknown_quantization_is_refused_everywhere(
    make_config: ConfigFactory, target: ExecutionTarget
) -> None:
    with pytest.raises(UnsupportedQuantizationError, match="unknown"):
        _decide(target, make_config(quantization_config={"quant_method": "fp8"}))


def test_cpu_refuses_moe_naming_other_targets(make_config: ConfigFactory) -> None:
    moe = make_config(
        architectures=["Qwen3_5MoeForConditionalGeneration"], model_type="qwen3_5_moe"
    )
    with pytest.raises(UnsupportedArchitectureError) as caught:
        _decide(CPU, moe)
    error = caught.value
    assert error.architecture == "Qwen3_5MoeForConditionalGeneration"
    assert set(error.other_targets) == {"local_apple", "local_cuda", "modal"}
    assert "Qwen3_5ForConditionalGeneration" in error.supported
    assert "local_cpu" in str(error) and REGISTRY_VERSIONS[CPU] in str(error)


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"auto_map": {"AutoModel": "modeling_x.X"}}, "auto_map is set"),
        ({"trust_remote_code": True}, "trust_remote_code is true"),
        ({"text_config": {"auto_map": {"AutoModel": "m.X"}}}, "text_config.auto_map"),
        ({"architectures": ["MyCustomVLM"], "model_type": "custom"}, "custom architecture"),
        ({"model_file": "model.py"}, "model_file is set"),
    ],
)
@pytest.mark.parametrize("target", list(ExecutionTarget))
def test_remote_code_is_refused(
    make_config: ConfigFactory, changes: dict[str, Any], reason: str, target: ExecutionTarget
) -> None:
    with pytest.raises(RemoteCodeError) as caught:
        _decide(target, make_config(**changes))
    assert reason in caught.value.reason
    assert "trust_remote_code is never enabled" in str(caught.value)


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"architectures": None}, "'architectures' must be"),
        ({"architectures": []}, "'architectures' must be"),
        ({"architectures": [1]}, "'architectures' must be"),
        ({"model_type": None}, "'model_type' is missing"),
        ({"model_type": "llama"}, "does not match"),
    ],
)
def test_invalid_configs(make_config: ConfigFactory, changes: dict[str, Any], problem: str) -> None:
    with pytest.raises(InvalidConfigError) as caught:
        _decide(MODAL, make_config(**changes))
    assert problem in caught.value.problem
    with pytest.raises(InvalidConfigError, match="not a JSON object"):
        _decide(MODAL, ["not", "a", "dict"])  # type: ignore[arg-type]


def test_refusals_share_a_base_class() -> None:
    for cls in (
        InvalidConfigError,
        RemoteCodeError,
        UnsupportedArchitectureError,
        UnsupportedQuantizationError,
    ):
        assert issubclass(cls, ModelRejectedError)


@pytest.mark.parametrize(
    ("target", "family", "context"),
    [
        (MODAL, "qwen3_5", 32768),
        (APPLE, "qwen3_5", 32768),
        (CPU, "qwen3_5", 8192),
        (MODAL, "smolvlm", 8192),
        (CPU, "smolvlm", 8192),
        (MODAL, "muse_glimmer", 32768),
    ],
)
def test_context_is_capped_per_target(
    make_config: ConfigFactory, target: ExecutionTarget, family: str, context: int
) -> None:
    limits = _decide(target, make_config(family)).limits
    assert limits.context_tokens == context
    assert limits.media.file.max_file_characters == min(
        registry_for(target).policy.max_file_characters, 4 * context
    )


def test_context_defaults_when_config_has_none(make_config: ConfigFactory) -> None:
    config = make_config("smolvlm", text_config={"hidden_size": 64})
    assert _decide(MODAL, config).limits.context_tokens == 4096


def test_mixed_image_video_only_for_qwen(make_config: ConfigFactory) -> None:
    assert _decide(MODAL, make_config()).limits.media.video.allow_mixed_image_video
    assert not _decide(MODAL, make_config("smolvlm")).limits.media.video.allow_mixed_image_video


def test_memory_estimate_formula_gpu(make_config: ConfigFactory) -> None:
    policy = registry_for(MODAL).policy
    decision = _decide(MODAL, make_config("qwen3_vl"), weight_bytes=10**9)
    assert decision.backend == "transformers"
    # 2 layers, 2 KV heads of 16, bf16 KV, 32768 tokens.
    kv = 2 * 2 * 2 * 16 * 2 * 32768
    expected = math.ceil(10**9 * policy.weight_overhead) + kv + policy.activation_bytes
    assert decision.estimated_memory_bytes == expected


def test_vllm_estimate_is_the_sum_of_the_engine_terms(make_config: ConfigFactory) -> None:
    config = make_config()
    config["text_config"] |= {
        "intermediate_size": 128,
        "linear_num_value_heads": 2,
        "linear_num_key_heads": 2,
        "linear_key_head_dim": 8,
        "linear_value_head_dim": 8,
        "linear_conv_kernel_dim": 4,
    }
    config["vision_config"] |= {"patch_size": 16, "spatial_merge_size": 2}
    decision = _decide(MODAL, config, weight_bytes=10**9)
    assert decision.backend == "vllm"
    options = dict(decision.backend_options)
    # vLLM's layout: a state page (conv (2x2x8 + 2x8) x 3 + recurrent 2x8x8, bf16) of 800 B
    # fits one 16-token attention page (16 x 2 KV heads x 16 x 2 x 2 B = 2048 B); one
    # attention and three linear layers make groups of one: 4 groups, 2048 B a block.
    # A caption (768x768 px / 32^2 = 576 image tokens + 64 + 128) holds 48 attention
    # blocks + 3 state blocks; one 32768-token request 2048 + 3; the null block.
    seqs = options["max_num_seqs"]
    assert seqs == 128  # 2 GiB / (51 x 2048 B) is far above the cap
    kv = 2048 * (1 + seqs * 51 + 2051)
    # 8192 tokens x (4 x 64 + 2 x 128) x 2 bytes + 128 x 300 float32 logits, and the
    # vision tower over max(8192, 1024) tokens = 32768 patches of width 32 (x 32 B)
    # plus their embeddings (8192 x 64 x 2 B)
    activation = 8192 * (4 * 64 + 2 * 128) * 2 + 128 * 300 * 4 + 32768 * 32 * 32 + 8192 * 64 * 2
    graphs = 3 + 31 + 1  # 1, 2, 4; 8..248 by 8; 256 (twice 128 sequences)
    terms = {
        "weights": 10**9,
        "kv": kv,
        "activation": activation,
        "cudagraph": 256 * 1024**2 + 16 * 1024**2 * graphs,
        "context": 768 * 1024**2,
    }
    assert {t: options[f"memory_{t}_bytes"] for t in terms} == terms
    assert decision.estimated_memory_bytes == sum(terms.values())
    assert options["max_num_batched_tokens"] == 8192
    assert options["enable_prefix_caching"] is False
    assert options["max_image_pixels"] == 1024 * 1024
    assert options["caption_image_pixels"] == 768 * 768


def _qwen35(make_config: ConfigFactory, size: str) -> dict[str, Any]:
    """Qwen3.5-2B / -27B's text and vision shapes (fp32 recurrent state, as published)."""
    config = make_config()
    layers = 24 if size == "2b" else 64
    config["text_config"] |= {
        "hidden_size": 2048 if size == "2b" else 5120,
        "num_hidden_layers": layers,
        "num_key_value_heads": 2 if size == "2b" else 4,
        "head_dim": 256,
        "layer_types": ["linear_attention", "linear_attention", "linear_attention"] * (layers // 4)
        + ["full_attention"] * (layers // 4),
        "linear_num_value_heads": 16 if size == "2b" else 48,
        "linear_num_key_heads": 16,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
        "linear_conv_kernel_dim": 4,
        "mamba_ssm_dtype": "float32",
    }
    config["vision_config"] |= {"hidden_size": 1024, "patch_size": 16, "spatial_merge_size": 2}
    return config


@pytest.mark.parametrize(
    ("size", "block", "block_bytes", "seqs"),
    [("2b", 544, 6 * 544 * 2048, 64), ("27b", 784, 16 * 784 * 4096, 16)],
)
def test_vllm_kv_is_laid_out_in_vllms_blocks(
    make_config: ConfigFactory, size: str, block: int, block_bytes: int, seqs: int
) -> None:
    from comfy_llm_profiles._vllm_memory import caption_tokens, kv_layout

    config = _qwen35(make_config, size)
    layout = kv_layout(config)
    assert layout is not None
    # the fp32 recurrent state page, padded up to the attention page (vLLM review r2, §2.2)
    assert (layout.block_size, layout.bytes_per_block) == (block, block_bytes)
    assert (layout.attention_groups, layout.state_groups, layout.state_blocks) == (1, 3, 1)
    assert kv_layout(config, prefix_caching=True).state_blocks == 2  # align mode
    options = dict(_decide(MODAL, config, weight_bytes=10**9).backend_options)
    assert options["max_num_seqs"] == seqs
    kv = options["memory_kv_bytes"]
    context = options["max_model_len"]
    # what the budget promises: max_num_seqs captions beside one full-context request
    assert layout.concurrency(kv, caption_tokens(config), beside=layout.blocks(context)) == seqs
    assert kv == block_bytes * (
        1 + seqs * layout.blocks(caption_tokens(config)) + layout.blocks(context)
    )


def test_vllm_state_follows_the_checkpoints_ssm_dtype(make_config: ConfigFactory) -> None:
    from comfy_llm_profiles._vllm_memory import kv_layout

    fp32 = _qwen35(make_config, "2b")
    bf16 = _qwen35(make_config, "2b")
    del bf16["text_config"]["mamba_ssm_dtype"]  # vLLM then stores it in the model dtype
    one, two = kv_layout(fp32), kv_layout(bf16)
    assert one is not None and two is not None
    assert (one.state_page_bytes, two.state_page_bytes) == (
        6144 * 3 * 2 + 16 * 128 * 128 * 4,
        6144 * 3 * 2 + 16 * 128 * 128 * 2,
    )
    assert (one.block_size, two.block_size) == (544, 288)  # 561,152 B: 274 tokens -> 288


def test_memory_estimate_formula_cpu_runs_float32(make_config: ConfigFactory) -> None:
    policy = registry_for(CPU).policy
    decision = _decide(CPU, make_config("smolvlm"), weight_bytes=10**9)
    # bf16 checkpoint runs in float32 (x2); 2 layers, 4 KV heads of 64/4=16, fp32 KV.
    kv = 2 * 2 * 4 * 16 * 4 * 8192
    expected = math.ceil(2 * 10**9 * policy.weight_overhead) + kv + policy.activation_bytes
    assert decision.estimated_memory_bytes == expected
    assert dict(decision.backend_options)["torch_dtype"] == "float32"


def test_memory_estimate_uses_full_attention_interval(make_config: ConfigFactory) -> None:
    config = make_config()
    del config["text_config"]["layer_types"]
    config["text_config"]["num_hidden_layers"] = 8
    options = dict(_decide(MODAL, config, weight_bytes=0).backend_options)
    # two full-attention layers of eight, in one 16-token group: 2 x 16 x 2 x 16 x 2 x 2 B a
    # block; 128 captions of 768 tokens (48 blocks each), one 32768-token request, the null
    assert options["memory_kv_bytes"] == 2 * 16 * 2 * 16 * 2 * 2 * (1 + 128 * 48 + 2048)


def test_memory_estimate_without_sizes_is_weights_plus_allowance(
    make_config: ConfigFactory,
) -> None:
    decision = _decide(APPLE, make_config("muse_glimmer"), weight_bytes=100)
    policy = registry_for(APPLE).policy
    assert (
        decision.estimated_memory_bytes
        == math.ceil(100 * policy.weight_overhead) + policy.activation_bytes
    )


def test_registry_versions_are_distinct_and_named_by_target() -> None:
    assert len(set(REGISTRY_VERSIONS.values())) == len(ExecutionTarget)
    for target, version in REGISTRY_VERSIONS.items():
        assert version.startswith(target.value + "/")
        assert registry_for(target.value).version == version
    with pytest.raises(ValueError):
        registry_for("local_tpu")


def test_decision_depends_on_registry_version(make_config: ConfigFactory) -> None:
    a = _decide(MODAL, make_config()).to_profile("owner/model", SHA)
    b = _decide(CUDA, make_config()).to_profile("owner/model", SHA)
    # Same decision on two targets: different ids (target + registry version differ).
    assert a.backend == b.backend
    assert a.profile_id != b.profile_id


# -- families, modalities, engines ------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "backend", "requirement"),
    [
        (APPLE, "mlx_vlm", "mlx-vlm==0.7.10"),
        (MODAL, "transformers", "transformers==5.24.0"),
        (CUDA, "transformers", "transformers==5.24.0"),
        (CPU, "transformers", "transformers==5.24.0"),
    ],
)
def test_qwen3_vl_runs_on_transformers_and_mlx(
    make_config: ConfigFactory, target: ExecutionTarget, backend: str, requirement: str
) -> None:
    decision = _decide(target, make_config("qwen3_vl"))
    assert (decision.family, decision.backend) == ("qwen3_vl", backend)
    assert decision.runtime_requirements == (requirement,)
    assert decision.modalities == ("text", "image", "video", "file")
    assert decision.reasoning_parser == "qwen3"
    assert decision.advertised_context_tokens == 262144
    profile = decision.to_profile("Qwen/Qwen3-VL-2B-Instruct", SHA)
    assert profile.runtime_requirements == (requirement,)


def test_qwen3_vl_moe_is_left_out_on_cpu(make_config: ConfigFactory) -> None:
    moe = make_config(
        "qwen3_vl", architectures=["Qwen3VLMoeForConditionalGeneration"], model_type="qwen3_vl_moe"
    )
    assert _decide(MODAL, moe).backend == "transformers"
    with pytest.raises(UnsupportedArchitectureError):
        _decide(CPU, moe)


@pytest.mark.parametrize(
    ("config_family", "family", "video"),
    [
        ("qwen3_5", "qwen3_5", True),
        ("qwen3_vl", "qwen3_vl", True),
        ("smolvlm", "smolvlm2", True),
        ("idefics3", "smolvlm", False),
        ("muse_glimmer", "muse_glimmer", False),
    ],
)
def test_modalities_are_reviewed_per_family(
    make_config: ConfigFactory, config_family: str, family: str, video: bool
) -> None:
    for target in ExecutionTarget:
        decision = _decide(target, make_config(config_family))
        assert decision.family == family
        assert ("video" in decision.modalities) is video
        assert (decision.limits.media.video.max_video_frames > 0) is video
        rule = registry_for(target).rule_for(decision.architecture)
        assert rule is not None
        reason = rule.modality_reason
        assert reason and "\n" not in reason and reason.endswith(".")


def test_every_backend_pins_an_engine_that_the_lock_resolves() -> None:
    import tomllib
    from pathlib import Path

    lock = tomllib.loads((Path(__file__).parents[3] / "uv.lock").read_text(encoding="utf-8"))
    locked = {(p["name"], p["version"]) for p in lock["package"]}
    for target in ExecutionTarget:
        for rule in registry_for(target).rules:
            for choice in rule.backends:
                assert choice.requirements, (target, rule.family, choice.name)
                for requirement in choice.requirements:
                    name, version = requirement.split("==")
                    assert (name, version) in locked, requirement
