"""The Modal app as defined offline: image pins, functions, Volumes, secret, GPUs."""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def app_module() -> Any:
    from comfy_llm_modal_remote.worker import _app

    return _app


def _unwrap(obj: Any) -> Any:
    from modal._utils.async_utils import synchronizer

    return synchronizer._translate_in(obj)


def _layers(image: Any) -> tuple[list[str], list[str]]:
    """Every Dockerfile command and every mounted module of the image definition."""
    commands: list[str] = []
    modules: list[str] = []
    pending = [_unwrap(image)]
    while pending:
        layer = pending.pop()
        nonlocals = inspect.getclosurevars(layer._load).nonlocals
        build = nonlocals.get("dockerfile_function")
        if build is not None:
            commands.extend(build("2025.06").commands)
        mount = nonlocals.get("mount")
        if mount is not None:
            modules.extend(re.findall(r"module_name='([\w.]+)'", repr(mount)))
        pending.extend((nonlocals.get("base_images") or {}).values())
        if nonlocals.get("base_image") is not None:
            pending.append(nonlocals["base_image"])
    return commands, modules


def test_image_pins_every_package_python_and_uv_and_holds_nothing_mlx(app_module: Any) -> None:
    commands, modules = _layers(app_module.image)
    (install,) = [c for c in commands if "/.uv/uv pip install" in c]
    packages = install.split("--compile-bytecode", 1)[1].split()
    assert len(packages) > 100
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+==[A-Za-z0-9.+!_-]+", p) for p in packages), packages
    names = {p.split("==")[0].lower() for p in packages}
    assert {"torch", "transformers", "vllm", "huggingface-hub", "hf-xet"} <= names
    assert "COPY --from=ghcr.io/astral-sh/uv:0.13.9 /uv /.uv/uv" in commands
    assert any(c.startswith("FROM python:3.11.") for c in commands)
    assert not [c for c in commands if "mlx" in c.lower()]
    assert not {n for n in names if "mlx" in n}
    # The workspace's own code goes in as local sources; the Apple backend does not.
    assert {"comfy_llm_backend_cuda", "comfy_llm_modal_remote", "comfy_llm_staging"} <= set(modules)
    assert "comfy_llm_backend_mlx" not in modules and "comfy_llm" not in modules
    assert "ENV COMFY_MODAL_REMOTE_STORAGE_ROOT=/storage" in commands


def test_image_lock_matches_uv_lock() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "modal_image_lock.py"), "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lock = json.loads(
        (ROOT / "packages/modal-remote/src/comfy_llm_modal_remote/image_lock.json").read_text()
    )
    assert lock["uv_version"] == "0.13.9" and lock["python_version"] == "3.11"


def test_stager_is_cpu_only_with_the_weight_volume_and_the_secret(app_module: Any) -> None:
    info = app_module.model_stager.info()
    assert info.gpus == []
    assert {path: mount.name for path, mount in info.volumes.items()} == {
        "/storage": "comfy-universal-storage"
    }
    assert info.secrets == ["modal.Secret.from_name('comfy')"]


def test_engine_has_the_gpu_both_volumes_and_no_secret(app_module: Any) -> None:
    info = app_module.RemoteEngine._get_class_service_function().info()
    assert info.gpus == [("L40S", 1)]
    assert {path: mount.name for path, mount in info.volumes.items()} == {
        "/storage": "comfy-universal-storage",
        "/llm-compile-cache": "comfy-universal-storage-llm-compile-cache",
    }
    # HF_TOKEN reaches the stager only: the GPU worker never downloads.
    assert info.secrets == []
    assert info.method_names == ["generate", "caption_chunk"]
    assert info.concurrency_info is None  # a cancel stops the input, not the container


@pytest.mark.parametrize("gpu", ["L4", "H100", "B200", "RTX-PRO-6000"])
def test_gpu_variants_come_from_with_options(app_module: Any, gpu: str) -> None:
    variant = _unwrap(app_module.RemoteEngine.with_options(gpu=gpu))
    assert variant._options.resources.gpu_config.gpu_type == gpu


def test_settings_defaults_and_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    from comfy_llm_modal_remote import ModalSettings

    defaults = ModalSettings.from_env()
    assert (defaults.volume_name, defaults.secret_name, defaults.storage_root) == (
        "comfy-universal-storage",
        "comfy",
        "/storage",
    )
    assert defaults.compile_cache_volume_name == "comfy-universal-storage-llm-compile-cache"
    monkeypatch.setenv("COMFY_MODAL_VOLUME_NAME", "weights")
    assert ModalSettings.from_env().compile_cache_volume_name == "weights-llm-compile-cache"
    monkeypatch.setenv("COMFY_MODAL_LLM_COMPILE_CACHE_VOLUME_NAME", "jit")
    monkeypatch.setenv("COMFY_MODAL_SECRET_NAME", "hf")
    monkeypatch.setenv("COMFY_MODAL_REMOTE_STORAGE_ROOT", "/models")
    changed = ModalSettings.from_env()
    assert (changed.compile_cache_volume_name, changed.secret_name, changed.storage_root) == (
        "jit",
        "hf",
        "/models",
    )
    from comfy_llm_modal_remote import image_spec

    assert ("COMFY_MODAL_REMOTE_STORAGE_ROOT", "/models") in image_spec(changed).env


def test_app_name_is_per_installation_and_persisted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from comfy_llm_modal_remote import app_name, installation_id

    monkeypatch.delenv("COMFY_MODAL_APP_NAME", raising=False)
    first = app_name(tmp_path / "a")
    assert re.fullmatch(r"comfy-llm-[0-9a-f]{16}", first)
    assert app_name(tmp_path / "a") == first
    assert installation_id(tmp_path / "a") == first.removeprefix("comfy-llm-")
    assert app_name(tmp_path / "b") != first
    monkeypatch.setenv("COMFY_MODAL_APP_NAME", "my-llm")
    assert app_name(tmp_path / "a") == "my-llm"


def test_missing_credentials_are_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from comfy_llm_modal_remote import ModalUnavailableError, check_modal_available

    monkeypatch.delenv("MODAL_TOKEN_ID", raising=False)
    monkeypatch.delenv("MODAL_TOKEN_SECRET", raising=False)
    monkeypatch.setenv("MODAL_CONFIG_PATH", "/nonexistent/.modal.toml")
    with pytest.raises(ModalUnavailableError, match=r"modal token new") as raised:
        check_modal_available()
    assert "comfy-llm[modal]" not in str(raised.value) or raised.value.missing == "package"
    assert raised.value.missing == "credentials"


def test_importing_the_package_imports_neither_modal_nor_torch() -> None:
    code = (
        "import sys, comfy_llm_modal_remote; print('modal' in sys.modules, 'torch' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"]


def test_worker_settings_set_here_reach_the_container_and_redeploy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from comfy_llm_modal_remote import ModalSettings, image_spec
    from comfy_llm_modal_remote.wire._fingerprint import code_fingerprint
    from comfy_llm_modal_remote.wire._settings import WORKER_SETTINGS

    for name in WORKER_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    plain = code_fingerprint()
    assert not {n for n, _ in image_spec(ModalSettings.from_env()).env} & set(WORKER_SETTINGS)
    values = {
        "COMFY_MODAL_LLM_VLLM_EXECUTION_MODE": "throughput",
        "COMFY_MODAL_LLM_MAX_RESIDENT_MODELS": "1",
        "COMFY_MODAL_LLM_RESERVE_FREE_GB": "12",
        "COMFY_MODAL_LLM_MEMORY_RECOVERY_TIMEOUT_SECONDS": "30",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    env = dict(image_spec(ModalSettings.from_env()).env)
    assert {name: env[name] for name in values} == values
    # Deployment-scoped: a changed setting is a new deployment.
    assert code_fingerprint() != plain


def test_tests_never_see_modal_credentials() -> None:
    import os

    from comfy_llm_testworld.pytest_plugin import NO_MODAL_CONFIG
    from modal.config import config, user_config_path

    assert user_config_path == NO_MODAL_CONFIG and not os.path.exists(NO_MODAL_CONFIG)
    assert config.get("token_id") is None and config.get("token_secret") is None


def test_missing_modal_package_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import tomllib

    from comfy_llm_core import install_command
    from comfy_llm_modal_remote import ModalUnavailableError, check_modal_available

    monkeypatch.setitem(sys.modules, "modal", None)
    monkeypatch.setitem(sys.modules, "modal.config", None)
    with pytest.raises(ModalUnavailableError) as raised:
        check_modal_available()
    assert raised.value.missing == "package"
    message = str(raised.value)
    assert install_command("modal") in message and "modal token new" in message
    # This workspace is a clone: it installs modal itself, at this package's own requirement.
    project = tomllib.loads((ROOT / "packages/modal-remote/pyproject.toml").read_text())
    (requirement,) = [d for d in project["project"]["dependencies"] if d.startswith("modal")]
    assert install_command("modal").endswith(f" '{requirement}'")


def test_a_modal_call_reads_an_empty_queue_as_no_events() -> None:
    import queue
    import threading
    import time

    from comfy_llm_modal_remote.client._transport import _ModalCall

    class ContractQueue:
        """modal 1.6's Queue.get_many contract: a blocking read that times out raises Empty."""

        def __init__(self) -> None:
            self.items: list[dict[str, Any]] = []

        def get_many(
            self, n: int, block: bool = True, timeout: float | None = None, *, partition: str
        ) -> list[dict[str, Any]]:
            assert partition == "req-1"
            if not self.items and block:
                time.sleep(timeout or 0)
                raise queue.Empty
            taken, self.items = self.items[:n], self.items[n:]
            return taken

    class FunctionCall:
        def __init__(self) -> None:
            self.release = threading.Event()
            self.cancelled = False

        def get(self) -> dict[str, Any]:
            self.release.wait(10)
            return {"ok": True}

        def cancel(self) -> None:
            self.cancelled = True

    events, function_call = ContractQueue(), FunctionCall()
    call = _ModalCall(function_call, events, "req-1")
    assert call.events(0.05) == [] and call.events(0.0) == []
    events.items.append({"stage": "load"})
    assert call.events(0.05) == [{"stage": "load"}]
    assert not call.done()
    function_call.release.set()
    assert call.outcome() == {"ok": True}
    call.cancel()
    assert function_call.cancelled


def _autoscaler(function: Any) -> Any:
    return inspect.getclosurevars(_unwrap(function)._load).nonlocals["autoscaler_settings"]


def test_engine_reserves_cpu_and_memory_and_both_pools_are_capped(app_module: Any) -> None:
    engine = app_module.RemoteEngine._get_class_service_function()
    info = engine.info()
    # Modal's default is 0.125 core with a soft limit (guide/resources).
    assert (info.cpu, info.memory_mib) == (8.0, 32768)
    assert _autoscaler(engine).max_containers == 4
    # A stage waiting on another installation's lease leaves stagers free (finding r2 10d).
    stagers = _autoscaler(app_module.model_stager).max_containers
    assert stagers == app_module.STAGER_MAX_CONTAINERS == 4


def test_engine_resources_are_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    from comfy_llm_core import InvalidSettingError
    from comfy_llm_modal_remote import ModalSettings

    monkeypatch.setenv("COMFY_MODAL_LLM_ENGINE_CPU", "16")
    monkeypatch.setenv("COMFY_MODAL_LLM_ENGINE_MEMORY_MB", "65536")
    monkeypatch.setenv("COMFY_MODAL_LLM_ENGINE_MAX_CONTAINERS", "2")
    settings = ModalSettings.from_env()
    assert (settings.engine_cpu, settings.engine_memory_mb, settings.engine_max_containers) == (
        16.0,
        65536,
        2,
    )
    assert settings.container_env()["COMFY_MODAL_LLM_ENGINE_MAX_CONTAINERS"] == "2"
    monkeypatch.setenv("COMFY_MODAL_LLM_ENGINE_MAX_CONTAINERS", "0")
    with pytest.raises(InvalidSettingError, match="COMFY_MODAL_LLM_ENGINE_MAX_CONTAINERS"):
        ModalSettings.from_env()


def test_image_carries_the_fingerprint_and_a_cuda_toolkit(app_module: Any) -> None:
    from comfy_llm_modal_remote.wire._fingerprint import code_fingerprint

    commands, _ = _layers(app_module.image)
    assert f"ENV COMFY_MODAL_LLM_CODE_FINGERPRINT={code_fingerprint()}" in commands
    assert app_module.fingerprint == code_fingerprint()
    cuda_home = "/usr/local/lib/python3.11/site-packages/nvidia/cu13"
    assert f"ENV CUDA_HOME={cuda_home}" in commands
    (path,) = [c for c in commands if c.startswith("ENV PATH=")]
    assert path.startswith(f"ENV PATH={cuda_home}/bin:") and ":/usr/bin:" in path
    assert "nvidia-cuda-nvcc" in " ".join(commands)  # the pip toolkit CUDA_HOME points into
    # One step completes the layout for FlashInfer's link line and proves it (a probe kernel
    # compiled and linked as FlashInfer does; test_cuda_toolchain.py runs it offline).
    (step,) = [c for c in commands if "CUDA toolchain ready" in c]
    assert step.startswith("RUN bash -c ") and f"home={cuda_home}" in step
    # A layer below the environment's (listed top down): a code change keeps it cached.
    assert commands.index(step) > commands.index(f"ENV CUDA_HOME={cuda_home}")


def test_only_the_image_mounts_local_sources(app_module: Any) -> None:
    """include_source=False: no second mount of the package per function (_functions.py:790)."""
    for function in (
        app_module.model_stager,
        app_module.RemoteEngine._get_class_service_function(),
    ):
        mounts = inspect.getclosurevars(_unwrap(function)._load).nonlocals["all_mounts"]
        assert [m for m in mounts if m.is_local()] == []


def test_benchmarks_pin_the_gpu_modal_could_upgrade() -> None:
    from comfy_llm_modal_remote.bench._requests import exact_gpu

    assert exact_gpu("H100") == "H100!" and exact_gpu("h100") == "h100!"
    assert exact_gpu("H200") == "H200" and exact_gpu("RTX-PRO-6000") == "RTX-PRO-6000"
    from modal._utils.function_utils import parse_gpu_config

    assert parse_gpu_config("H100!").gpu_type == "H100!"


def test_caption_workers_are_a_variant_that_scales_down_after_a_minute(app_module: Any) -> None:
    from comfy_llm_modal_remote.client._fanout import CAPTION_SCALEDOWN_SECONDS

    # The options ModalTransport.start_chunk spawns with, built by the real client.
    variant = _unwrap(
        app_module.RemoteEngine.with_options(gpu="H100", scaledown_window=CAPTION_SCALEDOWN_SECONDS)
    )
    assert variant._options.scaledown_window == CAPTION_SCALEDOWN_SECONDS == 60
    assert variant._options.resources.gpu_config.gpu_type == "H100"
    assert "caption_chunk" in variant._get_method_names()


def test_stage_leases_live_in_a_dict_named_after_the_volume(
    app_module: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every installation sharing the Volume reaches the same Dict, a name Modal accepts."""
    import dataclasses

    from comfy_llm_modal_remote import ModalSettings
    from modal._utils.name_utils import is_valid_object_name

    assert _unwrap(app_module.stage_leases)._name == "comfy-universal-storage-stage-leases"
    long = dataclasses.replace(ModalSettings.from_env(), volume_name="v" * 64)
    assert is_valid_object_name(long.stage_lease_dict_name)
    assert long.stage_lease_dict_name != ModalSettings.from_env().stage_lease_dict_name
    monkeypatch.setenv("COMFY_MODAL_LLM_STAGE_LEASE_SECONDS", "30")
    settings = ModalSettings.from_env()
    assert (settings.stage_lease_seconds, settings.stage_lease_renew_seconds) == (30.0, 7.5)
    assert settings.container_env()["COMFY_MODAL_LLM_STAGE_LEASE_RENEW_SECONDS"] == "7.5"


def test_every_modal_name_fits_modals_rule_long_names_hash_user_names_are_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Review r2 finding 6: a 50-character Volume or 58-character app name broke at import."""
    from comfy_llm_core import InvalidSettingError
    from comfy_llm_modal_remote import ModalSettings
    from comfy_llm_modal_remote.wire._settings import object_name, progress_queue_name
    from modal._utils.name_utils import check_object_name

    monkeypatch.setenv("COMFY_MODAL_VOLUME_NAME", "v" * 50)
    settings = ModalSettings.from_env()
    for name, kind in (
        (settings.compile_cache_volume_name, "Volume"),
        (settings.stage_lease_dict_name, "Dict"),
        (progress_queue_name("a" * 58), "Queue"),
    ):
        check_object_name(name, kind)  # the real client's rule
    assert settings.compile_cache_volume_name.startswith("v" * 47 + "-")
    assert object_name("short-name") == "short-name"
    assert object_name("x" * 80) != object_name("x" * 79 + "y")  # distinct, one rule
    monkeypatch.setenv("COMFY_MODAL_VOLUME_NAME", "v" * 65)
    with pytest.raises(InvalidSettingError, match="COMFY_MODAL_VOLUME_NAME"):
        ModalSettings.from_env()
    monkeypatch.setenv("COMFY_MODAL_VOLUME_NAME", "ok")
    monkeypatch.setenv("COMFY_MODAL_APP_NAME", "has space")
    with pytest.raises(InvalidSettingError, match="COMFY_MODAL_APP_NAME"):
        ModalSettings.from_env()
