"""The GPU offload plan (pure arithmetic) and the residency factory's own checks."""

from __future__ import annotations

import hashlib
import pickle

import comfy_llm_residency
import pytest
from comfy_llm_backend_llamacpp import (
    EngineNotInstalledError,
    GenerationError,
    UnsafeGgufError,
    UnsupportedBackendError,
    create_backend,
    plan_offload,
)
from comfy_llm_core import ExecutionTarget, ignore_progress
from comfy_llm_profiles import ModelProfile
from comfy_llm_profiles._profile import ProfileLimits

GIB = 2**30


def _plan(available: int | None, *, gpu: bool = True):
    # 32 layers + output of 0.25 GiB each (8.25 GiB), 1 GiB fixed (KV, projector, buffers)
    return plan_offload(
        layers=32, weight_bytes=33 * GIB // 4, fixed_bytes=GIB, available_bytes=available, gpu=gpu
    )


def test_everything_fits() -> None:
    plan = _plan(12 * GIB)
    assert (plan.gpu_layers, plan.mode, plan.offloaded_layers) == (-1, "all", 33)
    assert plan.as_metadata()["gpu_layers"] == 33


def test_part_fits() -> None:
    plan = _plan(5 * GIB)  # 4 GiB after the fixed part: 16 layers of 0.25 GiB
    assert (plan.gpu_layers, plan.mode, plan.total_layers) == (16, "some", 33)
    assert plan.reason == "5.0 GiB granted holds 16 of 33 layers"


def test_nothing_fits_or_no_gpu() -> None:
    assert _plan(GIB // 2).mode == "none"
    cpu = _plan(100 * GIB, gpu=False)
    assert (cpu.gpu_layers, cpu.mode) == (0, "none")
    assert _plan(None).mode == "all"  # no admission ran: all layers, as llama.cpp users expect


def _profile(backend: str) -> ModelProfile:
    return ModelProfile(
        repository="test-owner/gguf",
        revision=hashlib.sha1(b"gguf").hexdigest(),
        execution_target=ExecutionTarget.LOCAL_CPU,
        backend=backend,
        architecture="LlamaForCausalLM",
        model_type="llama",
        dtype="bfloat16",
        quantization_method="none",
        modalities=("text", "image"),
        limits=ProfileLimits.from_dict(
            {
                "context_tokens": 4096,
                "max_images": 4,
                "max_video_frames": 16,
                "max_file_bytes": 1 << 20,
                "max_total_file_bytes": 4 << 20,
                "max_file_characters": 100_000,
                "max_pdf_pages": 10,
                "allow_mixed_image_video": False,
            }
        ),
        reasoning_parser="none",
        estimated_memory_bytes=GIB,
        weight_bytes=GIB,
        registry_version="test-1",
    )


def test_factory_refuses_a_profile_for_another_engine(tmp_path) -> None:
    with pytest.raises(UnsupportedBackendError, match="backend=transformers"):
        create_backend(_profile("transformers"), tmp_path, ignore_progress)


def test_errors_pickle_with_their_attributes() -> None:
    for error in (
        UnsafeGgufError("/m/x.gguf", "tensor 'a' claims offset 0"),
        EngineNotInstalledError("llama_cpp", "llama_cpp", "No module named 'llama_cpp'"),
        GenerationError("prompt", "llama.cpp failed on prompt chunk 0"),
    ):
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error) and str(copy) == str(error)
        assert copy.__dict__ == error.__dict__


def test_the_package_speaks_the_shared_backend_vocabulary() -> None:
    # The words every engine package exports (the repository's vocabulary test runs the
    # same check over the engine table once llama_cpp is registered there).
    from comfy_llm_testworld.engine_vocabulary import vocabulary_problems

    assert vocabulary_problems("comfy_llm_backend_llamacpp", ("llama_cpp",)) == []
    assert EngineNotInstalledError is comfy_llm_residency.EngineNotInstalledError
