"""The Modal deployment's names and paths, read from the environment at call time.

The names are the seed system's, so a user moving over keeps their Volume,
secret and app. The same values must hold on both sides: the local side
bakes them into the image's environment when it defines the app, so the
container reads what the dispatcher read.
"""

from __future__ import annotations

import dataclasses

from comfy_llm_core import env_float, env_int, env_str

__all__ = [
    "APP_NAME_ENV",
    "COMPILE_CACHE_MOUNT",
    "COMPILE_CACHE_ROOT_ENV",
    "COMPILE_CACHE_VOLUME_ENV",
    "DEFAULT_SECRET_NAME",
    "DEFAULT_STORAGE_ROOT",
    "DEFAULT_VOLUME_NAME",
    "ENGINE_CPU_ENV",
    "ENGINE_MAX_CONTAINERS_ENV",
    "ENGINE_MEMORY_ENV",
    "FINGERPRINT_ENV",
    "SECRET_NAME_ENV",
    "STORAGE_ROOT_ENV",
    "VOLUME_NAME_ENV",
    "WORKER_SETTINGS",
    "ModalSettings",
]

APP_NAME_ENV = "COMFY_MODAL_APP_NAME"
VOLUME_NAME_ENV = "COMFY_MODAL_VOLUME_NAME"
COMPILE_CACHE_VOLUME_ENV = "COMFY_MODAL_LLM_COMPILE_CACHE_VOLUME_NAME"
SECRET_NAME_ENV = "COMFY_MODAL_SECRET_NAME"
STORAGE_ROOT_ENV = "COMFY_MODAL_REMOTE_STORAGE_ROOT"

DEFAULT_VOLUME_NAME = "comfy-universal-storage"
DEFAULT_SECRET_NAME = "comfy"
DEFAULT_STORAGE_ROOT = "/storage"
COMPILE_CACHE_ROOT_ENV = "COMFY_MODAL_LLM_COMPILE_CACHE_ROOT"
"""The vLLM backend's compile-cache root (backend-cuda reads it); the GPU image
sets it to the mount below."""
COMPILE_CACHE_MOUNT = "/llm-compile-cache"
"""Where the compile-cache Volume is mounted in the GPU container (the vLLM
backend's cache root points here)."""

FINGERPRINT_ENV = "COMFY_MODAL_LLM_CODE_FINGERPRINT"
"""The deployment's code fingerprint, baked into the image; the stager echoes it
back, so a machine whose code differs from what the app runs redeploys."""
ENGINE_CPU_ENV = "COMFY_MODAL_LLM_ENGINE_CPU"
ENGINE_MEMORY_ENV = "COMFY_MODAL_LLM_ENGINE_MEMORY_MB"
ENGINE_MAX_CONTAINERS_ENV = "COMFY_MODAL_LLM_ENGINE_MAX_CONTAINERS"
DEFAULT_ENGINE_CPU = 8.0
"""Cores reserved per GPU container: Modal's default is 0.125 (soft limit), which
throttles Inductor compiles and image preprocessing."""
DEFAULT_ENGINE_MEMORY_MB = 32 * 1024
DEFAULT_ENGINE_MAX_CONTAINERS = 4
"""GPU containers one affinity pool may run at once; concurrent prompts beyond it queue."""

WORKER_SETTINGS = (
    "COMFY_MODAL_LLM_VLLM_EXECUTION_MODE",
    "COMFY_MODAL_LLM_MAX_RESIDENT_MODELS",
    "COMFY_MODAL_LLM_RESERVE_FREE_GB",
    "COMFY_MODAL_LLM_MEMORY_RECOVERY_TIMEOUT_SECONDS",
)
"""Settings the GPU worker reads (residency, the vLLM backend). A container
sees only its image's environment, so the values set on the local side are
baked into the image when the app is deployed (deployment-scoped, like the
execution mode itself); a change redeploys (see ``code_fingerprint``). The
worker checks them where it reads them; a bad one fails the request with the
reader's own error."""


@dataclasses.dataclass(frozen=True, slots=True)
class ModalSettings:
    """Names and paths of one deployment.

    Attributes:
        app_name: ``COMFY_MODAL_APP_NAME``, or None for the per-installation name.
        volume_name: The weight Volume (``COMFY_MODAL_VOLUME_NAME``).
        compile_cache_volume_name: ``COMFY_MODAL_LLM_COMPILE_CACHE_VOLUME_NAME``,
            default ``<volume_name>-llm-compile-cache``.
        secret_name: The secret collection holding HF_TOKEN (``COMFY_MODAL_SECRET_NAME``).
        storage_root: Where the weight Volume is mounted (``COMFY_MODAL_REMOTE_STORAGE_ROOT``).
        worker_settings: The :data:`WORKER_SETTINGS` set on this side, as (name, value).
        engine_cpu: Cores the RemoteEngine requests (``COMFY_MODAL_LLM_ENGINE_CPU``).
        engine_memory_mb: Memory it requests in MiB (``COMFY_MODAL_LLM_ENGINE_MEMORY_MB``).
        engine_max_containers: Its ``max_containers`` (``COMFY_MODAL_LLM_ENGINE_MAX_CONTAINERS``).
    """

    app_name: str | None
    volume_name: str
    compile_cache_volume_name: str
    secret_name: str
    storage_root: str
    worker_settings: tuple[tuple[str, str], ...] = ()
    engine_cpu: float = DEFAULT_ENGINE_CPU
    engine_memory_mb: int = DEFAULT_ENGINE_MEMORY_MB
    engine_max_containers: int = DEFAULT_ENGINE_MAX_CONTAINERS

    @classmethod
    def from_env(cls) -> ModalSettings:
        """Read every setting from the environment (defaults where unset)."""
        volume = env_str(VOLUME_NAME_ENV, DEFAULT_VOLUME_NAME) or DEFAULT_VOLUME_NAME
        return cls(
            app_name=env_str(APP_NAME_ENV),
            volume_name=volume,
            compile_cache_volume_name=env_str(COMPILE_CACHE_VOLUME_ENV)
            or f"{volume}-llm-compile-cache",
            secret_name=env_str(SECRET_NAME_ENV, DEFAULT_SECRET_NAME) or DEFAULT_SECRET_NAME,
            storage_root=env_str(STORAGE_ROOT_ENV, DEFAULT_STORAGE_ROOT) or DEFAULT_STORAGE_ROOT,
            worker_settings=tuple(
                (name, value) for name in WORKER_SETTINGS if (value := env_str(name))
            ),
            engine_cpu=env_float(ENGINE_CPU_ENV, DEFAULT_ENGINE_CPU, minimum=0.125, maximum=64),
            engine_memory_mb=env_int(
                ENGINE_MEMORY_ENV, DEFAULT_ENGINE_MEMORY_MB, minimum=1024, maximum=1024 * 1024
            ),
            engine_max_containers=env_int(
                ENGINE_MAX_CONTAINERS_ENV, DEFAULT_ENGINE_MAX_CONTAINERS, minimum=1, maximum=100
            ),
        )

    def container_env(self) -> dict[str, str]:
        """The variables baked into the image so the container reads the same values."""
        return {
            VOLUME_NAME_ENV: self.volume_name,
            COMPILE_CACHE_VOLUME_ENV: self.compile_cache_volume_name,
            SECRET_NAME_ENV: self.secret_name,
            STORAGE_ROOT_ENV: self.storage_root,
            ENGINE_CPU_ENV: repr(self.engine_cpu),
            ENGINE_MEMORY_ENV: str(self.engine_memory_mb),
            ENGINE_MAX_CONTAINERS_ENV: str(self.engine_max_containers),
            **dict(self.worker_settings),
        }
