"""The engine table and the family records: what the registries are built from."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from comfy_llm_core import ExecutionTarget, install_command
from comfy_llm_profiles import ENGINES, EngineSpec, engine_spec, registry_for
from comfy_llm_profiles._engines import quantization_methods
from comfy_llm_profiles._families import FAMILIES
from comfy_llm_profiles._registry import _TARGETS, REGISTRY_VERSIONS
from comfy_llm_profiles.errors import ProfileValidationError

APPLE, CUDA, CPU, MODAL = (
    ExecutionTarget.LOCAL_APPLE,
    ExecutionTarget.LOCAL_CUDA,
    ExecutionTarget.LOCAL_CPU,
    ExecutionTarget.MODAL,
)

# What each target runs, family by family (engines in order of preference): the
# per-target tables the registries were written as before engines became data
# (a new family is not listed here; the fingerprint test sees it).
_REVIEWED = ("qwen3_5", "qwen3_vl", "smolvlm2", "smolvlm", "muse_glimmer")
# llama.cpp (GGUF) runs on the local targets for the families reviewed as GGUF.
_GGUF = ("qwen3_5", "qwen3_vl", "smolvlm")


def _with_gguf(engines: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    return {f: (*e, "llama_cpp") if f in _GGUF else e for f, e in engines.items()}


EXPECTED = {
    APPLE: _with_gguf(dict.fromkeys(_REVIEWED, ("mlx_vlm",))),
    CUDA: _with_gguf(
        dict.fromkeys(_REVIEWED, ("transformers",)) | {"qwen3_5": ("vllm", "transformers")}
    ),
    MODAL: dict.fromkeys(_REVIEWED, ("transformers",)) | {"qwen3_5": ("vllm", "transformers")},
    CPU: _with_gguf(dict.fromkeys(_REVIEWED, ("transformers",))),
}


def test_each_target_runs_the_reviewed_engines_in_order() -> None:
    for target, expected in EXPECTED.items():
        rules = {r.family: tuple(e.name for e in r.backends) for r in registry_for(target).rules}
        assert {f: rules[f] for f in expected} == expected, target


def test_each_registry_version_stands_for_its_rules() -> None:
    for target in ExecutionTarget:
        registry, pinned = registry_for(target), _TARGETS[target]
        assert registry.version == REGISTRY_VERSIONS[target] == pinned.version
        assert registry.fingerprint == pinned.fingerprint, (
            f"{target.value}'s registry changed under version {pinned.version}: bump the "
            f"version in _registry.py and set its fingerprint to {registry.fingerprint!r}"
        )


def test_the_fingerprint_sees_a_record_change(monkeypatch: pytest.MonkeyPatch) -> None:
    before = {t: registry_for(t).fingerprint for t in ExecutionTarget}
    changed = dataclasses.replace(FAMILIES["smolvlm"], reasoning_parser="qwen3")
    monkeypatch.setitem(FAMILIES, "smolvlm", changed)
    assert all(registry_for(t).fingerprint != before[t] for t in ExecutionTarget)


def test_every_family_names_known_engines_in_preference_order() -> None:
    for family in FAMILIES.values():
        assert family.engines, family.name
        assert len(set(family.engines)) == len(family.engines), family.name
        assert set(family.engines) <= set(ENGINES), family.name
        assert {engine for engine, _ in family.engine_options} <= set(family.engines)


def test_the_table_holds_what_used_to_be_literals() -> None:
    assert list(ENGINES) == ["mlx_vlm", "transformers", "vllm", "llama_cpp"]
    assert {n: s.vram_overhead_gb for n, s in ENGINES.items()} == {
        "mlx_vlm": 2,
        "transformers": 8,
        "vllm": 12,
        "llama_cpp": 1,
    }
    assert {n for n, s in ENGINES.items() if s.out_of_process} == {"vllm"}
    assert {n for n, s in ENGINES.items() if s.continuous_batching} == {"vllm"}
    assert quantization_methods()[:4] == ("none", "mlx", "fp8", "modelopt_fp4")
    # ... then the GGUF file types llama.cpp loads (general.file_type names).
    assert {"Q4_K_M", "Q8_0", "F16"} <= set(quantization_methods()[4:])
    assert engine_spec("vllm").install_hint.startswith(f"{install_command('vllm')} (Linux)")
    assert engine_spec("transformers").install_hint == install_command("cuda")
    assert {n: s.weight_format for n, s in ENGINES.items() if s.weight_format != "safetensors"} == {
        "llama_cpp": "gguf"
    }


def test_a_continuous_batching_engine_is_handed_at_least_twice_its_width(
    make_profile: Any, make_config: Any
) -> None:
    from comfy_llm_profiles import decide, engine_batch_size

    transformers = make_profile()
    assert engine_batch_size(transformers, 8) == 8  # batch_size, whatever it is
    vllm = make_profile(
        execution_target=MODAL,
        backend="vllm",
        backend_options=(("max_model_len", 8192), ("max_num_seqs", 64)),
        runtime_requirements=("vllm==0.32.0",),
    )
    assert engine_batch_size(vllm, 8) == 128  # 2 x max_num_seqs (vLLM review r2, F5)
    assert engine_batch_size(vllm, 200) == 200  # a larger batch_size stays
    unknown = make_profile(
        execution_target=MODAL,
        backend="vllm",
        backend_options=(("max_model_len", 8192),),
        runtime_requirements=("vllm==0.32.0",),
    )
    assert engine_batch_size(unknown, 8) == 8  # no width: batch_size
    # the option the rule reads is the one a vLLM decision writes
    decision = decide(MODAL, make_config("qwen3_5"), weight_bytes=10**9, backends=set(ENGINES))
    assert decision.backend == "vllm"
    assert isinstance(dict(decision.backend_options)[engine_spec("vllm").width_option], int)


def test_an_unknown_engine_is_a_profile_error() -> None:
    with pytest.raises(ProfileValidationError, match="one of mlx_vlm, transformers, vllm"):
        engine_spec("llamacpp")


def test_a_weight_format_nobody_admits_is_refused_when_declared() -> None:
    with pytest.raises(ValueError, match=r"'pickle' weights.*decide that first"):
        dataclasses.replace(engine_spec("transformers"), name="bad_engine", weight_format="pickle")


def test_a_family_cap_lowers_a_limit_and_a_quantization_review_narrows(
    monkeypatch: pytest.MonkeyPatch, make_config: object
) -> None:
    from comfy_llm_profiles import decide
    from comfy_llm_profiles.errors import UnsupportedQuantizationError

    capped = dataclasses.replace(
        FAMILIES["smolvlm"], limits=(("max_images", 1),), quantizations=("none",)
    )
    monkeypatch.setitem(FAMILIES, "smolvlm", capped)
    config = make_config("idefics3")  # type: ignore[operator]
    decision = decide(CPU, config, weight_bytes=1000, backends=set(ENGINES))
    assert decision.limits.media.image.max_images == 1  # the CPU policy says 4
    fp8 = make_config(
        "qwen3_5", quantization_config={"quant_method": "fp8", "weight_block_size": [128, 128]}
    )  # type: ignore[operator]
    narrowed = dataclasses.replace(FAMILIES["qwen3_5"], quantizations=("none",))
    monkeypatch.setitem(FAMILIES, "qwen3_5", narrowed)
    with pytest.raises(UnsupportedQuantizationError) as caught:
        decide(MODAL, fp8, weight_bytes=1000, backends=set(ENGINES))
    assert caught.value.allowed == ("none",)


def test_a_spec_is_frozen_data() -> None:
    spec = engine_spec("mlx_vlm")
    assert isinstance(spec, EngineSpec)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.name = "other"  # type: ignore[misc]
