"""The Modal deployment's names and paths, read from the environment at call time.

The names are the seed system's, so a user moving over keeps their Volume,
secret and app. The same values must hold on both sides: the local side
bakes them into the image's environment when it defines the app, so the
container reads what the dispatcher read.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re

from comfy_llm_core import InvalidSettingError, env_float, env_int, env_str

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
    "ENGINE_SCALEDOWN_SECONDS",
    "ENGINE_TIMEOUT_SECONDS",
    "FINGERPRINT_ENV",
    "SECRET_NAME_ENV",
    "STAGE_LEASE_ENV",
    "STAGER_TIMEOUT_SECONDS",
    "STAGE_LEASE_RENEW_ENV",
    "STORAGE_ROOT_ENV",
    "VOLUME_NAME_ENV",
    "WORKER_SETTINGS",
    "ModalSettings",
    "object_name",
    "progress_queue_name",
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
ENGINE_SCALEDOWN_SECONDS = 600
"""Seconds a GPU container of the node's requests stays up (billed) after its last one."""
STAGER_TIMEOUT_SECONDS = 3 * 3600
ENGINE_TIMEOUT_SECONDS = 3600
"""The functions' ``timeout=``: Modal ends an input that runs longer (``FunctionTimeoutError``).
The client names them in its message; the app decorates with them."""
DEFAULT_ENGINE_MAX_CONTAINERS = 4
"""GPU containers one affinity pool may run at once; concurrent prompts beyond it queue."""

STAGE_LEASE_ENV = "COMFY_MODAL_LLM_STAGE_LEASE_SECONDS"
STAGE_LEASE_RENEW_ENV = "COMFY_MODAL_LLM_STAGE_LEASE_RENEW_SECONDS"
DEFAULT_STAGE_LEASE_SECONDS = 120.0
"""How long a stager's lease across installations (``_stage_lease``) outlives its
last renewal. Longer than staging's own file-lease staleness (90 s), so the lease
file a killed holder's background commit left on the Volume is stale by the time
its Dict lease is taken over."""
DEFAULT_STAGE_LEASE_RENEW_SECONDS = 15.0

MAX_OBJECT_NAME = 64
_OBJECT_NAME = re.compile(r"^[a-zA-Z0-9-_.]+$")
_APP_ID = re.compile(r"^ap-[a-zA-Z0-9]{22}$")


def object_name(name: str) -> str:
    """A derived Modal object name that fits Modal's rule, the one hashing rule for all.

    Apps, Volumes, Queues and Dicts share it: at most 64 characters of
    ``[a-zA-Z0-9-_.]`` (modal/_utils/name_utils.py:26-33, checked by
    ``Volume``/``Queue``/``Dict.from_name`` and ``App``). A longer derived
    name keeps its first 47 characters and adds ``-`` and 16 hex digits of
    its SHA-256, so it stays recognizable and distinct.
    """
    if len(name) <= MAX_OBJECT_NAME:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:16]
    return f"{name[: MAX_OBJECT_NAME - 17]}-{digest}"


def progress_queue_name(app_name: str) -> str:
    """The app's progress Queue (its partitions are the requests)."""
    return object_name(f"{app_name}-progress")


def _checked_name(variable: str, value: str) -> str:
    """A name the user set must be valid as it is (it names an existing object)."""
    if len(value) <= MAX_OBJECT_NAME and _OBJECT_NAME.match(value) and not _APP_ID.match(value):
        return value
    raise InvalidSettingError(
        variable,
        value,
        f"a Modal name: at most {MAX_OBJECT_NAME} letters, digits, '-', '_' or '.' "
        "(modal.com's rule for apps, Volumes, secrets, Queues and Dicts)",
    )


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
        stage_lease_seconds: How long a stage lease outlives its last renewal
            (``COMFY_MODAL_LLM_STAGE_LEASE_SECONDS``, 1-3600, default 120).
        stage_lease_renew_seconds: How often its holder renews it
            (``COMFY_MODAL_LLM_STAGE_LEASE_RENEW_SECONDS``, at most half the lease).
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
    stage_lease_seconds: float = DEFAULT_STAGE_LEASE_SECONDS
    stage_lease_renew_seconds: float = DEFAULT_STAGE_LEASE_RENEW_SECONDS

    @property
    def stage_lease_dict_name(self) -> str:
        """The ``modal.Dict`` of staging leases: one per weight Volume, whatever the app.

        Derived from a valid Volume name, so only the length can break it
        (:func:`object_name`).
        """
        return object_name(f"{self.volume_name}-stage-leases")

    @classmethod
    def from_env(cls) -> ModalSettings:
        """Read every setting from the environment (defaults where unset)."""
        volume = _checked_name(
            VOLUME_NAME_ENV, env_str(VOLUME_NAME_ENV, DEFAULT_VOLUME_NAME) or DEFAULT_VOLUME_NAME
        )
        app = env_str(APP_NAME_ENV)
        cache = env_str(COMPILE_CACHE_VOLUME_ENV)
        return cls(
            app_name=_checked_name(APP_NAME_ENV, app) if app else None,
            volume_name=volume,
            compile_cache_volume_name=(
                _checked_name(COMPILE_CACHE_VOLUME_ENV, cache)
                if cache
                else object_name(f"{volume}-llm-compile-cache")
            ),
            secret_name=_checked_name(
                SECRET_NAME_ENV,
                env_str(SECRET_NAME_ENV, DEFAULT_SECRET_NAME) or DEFAULT_SECRET_NAME,
            ),
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
            **_stage_lease_times(),
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
            STAGE_LEASE_ENV: repr(self.stage_lease_seconds),
            STAGE_LEASE_RENEW_ENV: repr(self.stage_lease_renew_seconds),
            **dict(self.worker_settings),
        }


def _stage_lease_times() -> dict[str, float]:
    """The lease's expiry and renewal interval; a renewal must fit twice in an expiry."""
    expiry = env_float(STAGE_LEASE_ENV, DEFAULT_STAGE_LEASE_SECONDS, minimum=1.0, maximum=3600.0)
    renew = env_float(
        STAGE_LEASE_RENEW_ENV,
        min(DEFAULT_STAGE_LEASE_RENEW_SECONDS, expiry / 4),
        minimum=0.05,
        maximum=600.0,
    )
    if renew > expiry / 2:
        raise InvalidSettingError(
            STAGE_LEASE_RENEW_ENV,
            env_str(STAGE_LEASE_RENEW_ENV),
            f"at most half of {STAGE_LEASE_ENV} ({expiry:g} s), so one late renewal"
            " does not let another installation take the lease over; lower it or raise"
            f" {STAGE_LEASE_ENV}",
        )
    return {"stage_lease_seconds": expiry, "stage_lease_renew_seconds": renew}
