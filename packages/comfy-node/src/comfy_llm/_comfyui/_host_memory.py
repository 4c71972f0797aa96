"""ComfyUI's model manager sees comfy-llm's resident models and can unload them.

ComfyUI frees memory by walking ``comfy.model_management.current_loaded_models``
(a list of ``LoadedModel``, newest first): ``free_memory(memory_required,
device, keep_loaded)`` calls ``model_unload(memory_to_free)`` on each idle entry
of that device until enough is free and pops the entries whose call returned
True; ``unload_all_models()`` (the "Unload models" button, POST ``/free``) is
``free_memory(1e30, device)`` for every device; a diffusion model's
``load_models_gpu`` calls ``free_memory`` for its device (never for the CPU
device). This module puts one entry per resident LLM into that list:

* a real ``ModelPatcher`` around a weightless placeholder that carries the
  measured size (ComfyUI must not move an engine's memory itself: it cannot
  move MLX, vLLM or device-mapped models at all, and on the CPU its offload is
  a no-op), inside a ``LoadedModel`` subclass whose ``model_unload`` asks the
  resident manager to unload the whole engine (``evict_for_host``): declined
  while the model is generating, so ComfyUI moves on to its next model;
* when the manager unloads a model for its own reasons, its entry leaves the
  list; when ComfyUI unloaded it, ComfyUI pops the entry itself.

The surface is checked once (:func:`host_bridge_status`); a ComfyUI whose
model manager differs gets today's one-way behaviour (comfy-llm asks ComfyUI to
free memory before its own cold loads) and one log line saying so.
"""

from __future__ import annotations

import inspect
import logging
import threading
import weakref
from typing import Any

from comfy_llm_core import ExecutionTarget
from comfy_llm_residency import ResidentInfo, create_backend, get_manager

__all__ = ["ComfyHostBridge", "host_bridge", "host_bridge_status", "resident_entries"]

logger = logging.getLogger("comfy_llm")

KNOWN_SURFACE = "ComfyUI 0.33 model management"
_UNLOAD_ALL = 1e29
"""``unload_all_models`` asks for 1e30 bytes; anything this large means "all"."""
_GIB = 1024**3

_lock = threading.Lock()
_surface: dict[str, Any] = {}
"""The one check's outcome: ``problem`` (None when known) and the entry ``classes``."""
_bridges: dict[ExecutionTarget, ComfyHostBridge] = {}


class ResidentLLM:
    """The weightless stand-in ComfyUI's ``ModelPatcher`` wraps for one LLM.

    Its class name is what ComfyUI's own log lines show for the entry.
    """

    def __init__(self, info: ResidentInfo, device: Any) -> None:
        self.profile_id = info.profile_id
        self.repository = info.repository
        self.device = device
        self.model_loaded_weight_memory = info.resident_bytes

    def state_dict(self) -> dict[str, Any]:
        return {}

    def __repr__(self) -> str:
        return f"ResidentLLM({self.repository})"


def _check(mm: Any, patcher_module: Any) -> str | None:
    """What differs from the surface this module knows, or None."""
    if not isinstance(getattr(mm, "current_loaded_models", None), list):
        return "comfy.model_management.current_loaded_models is not a list"
    for name in ("free_memory", "unload_all_models", "get_torch_device", "LoadedModel"):
        if not callable(getattr(mm, name, None)):
            return f"comfy.model_management.{name} is missing"
    params = list(inspect.signature(mm.free_memory).parameters)
    if params[:3] != ["memory_required", "device", "keep_loaded"]:
        return f"free_memory takes ({', '.join(params)})"
    for name in ("model_unload", "model_memory", "model_offloaded_memory", "is_dead"):
        if not callable(getattr(mm.LoadedModel, name, None)):
            return f"LoadedModel.{name} is missing"
    unload_params = list(inspect.signature(mm.LoadedModel.model_unload).parameters)
    if unload_params[:2] != ["self", "memory_to_free"]:
        return f"LoadedModel.model_unload takes ({', '.join(unload_params)})"
    patcher = getattr(patcher_module, "ModelPatcher", None)
    if not isinstance(patcher, type):
        return "comfy.model_patcher.ModelPatcher is missing"
    patcher_params = list(inspect.signature(patcher).parameters)
    if patcher_params[:4] != ["model", "load_device", "offload_device", "size"]:
        return f"ModelPatcher takes ({', '.join(patcher_params)})"
    return None


def _entry_class(mm: Any) -> type:
    class ResidentLLMEntry(mm.LoadedModel):  # type: ignore[misc,name-defined]
        """A ``LoadedModel`` whose unload goes through comfy-llm's resident manager."""

        def __init__(self, patcher: Any, bridge: ComfyHostBridge) -> None:
            super().__init__(patcher)
            placeholder = patcher.model
            self.real_model = weakref.ref(placeholder)
            self.model_finalizer = weakref.finalize(placeholder, lambda: None)
            self.model_finalizer.atexit = False
            self.profile_id = placeholder.profile_id
            self.repository = placeholder.repository
            self._bridge = bridge
            # LoadedModel holds its patcher weakly; ComfyUI reads entry.model.model
            # right after a successful unload, so the entry keeps it alive itself.
            self._patcher = patcher

        def model_unload(self, memory_to_free: Any = None, unpatch_weights: bool = True) -> bool:
            del unpatch_weights
            return self._bridge.host_unload(self, memory_to_free)

    return ResidentLLMEntry


def host_bridge_status() -> str | None:
    """Check ComfyUI's model manager once; None when the bridge can be used.

    Returns:
        None when the surface is the known one, else what differs (logged once).
    """
    with _lock:
        if "problem" in _surface:
            return _surface["problem"]  # type: ignore[no-any-return]
        problem: str | None
        try:
            from comfy import model_management as mm
            from comfy import model_patcher

            problem = _check(mm, model_patcher)
            if problem is None:
                _surface["classes"] = (model_patcher.ModelPatcher, _entry_class(mm))
        except Exception as error:  # any import or inspection failure means "unknown"
            problem = f"{type(error).__name__}: {error}"
        _surface["problem"] = problem
        if problem is None:
            return None
    logger.warning(
        "comfy-llm: this ComfyUI's model manager differs from %s (%s). ComfyUI's "
        "'Unload models' and /free cannot unload comfy-llm's models here; comfy-llm still "
        "asks ComfyUI to free memory before it loads one.",
        KNOWN_SURFACE,
        problem,
    )
    return problem


def host_bridge(target: ExecutionTarget) -> ComfyHostBridge | None:
    """The bridge for one execution target, or None on an unknown ComfyUI."""
    if host_bridge_status() is not None or target is ExecutionTarget.MODAL:
        return None
    with _lock:
        bridge = _bridges.get(target)
        if bridge is None:
            bridge = _bridges[target] = ComfyHostBridge(target)
        return bridge


def resident_entries() -> list[Any]:
    """Every comfy-llm entry in ComfyUI's list (``keep_loaded`` for our own frees)."""
    with _lock:
        bridges = list(_bridges.values())
    return [entry for bridge in bridges for entry in bridge.entries()]


def _reason(memory_to_free: Any, device: Any) -> str:
    if memory_to_free is None:
        return "ComfyUI unloaded the model"
    if memory_to_free >= _UNLOAD_ALL:
        return "ComfyUI unloaded all models (Unload models or POST /free)"
    return f"ComfyUI needed {memory_to_free / _GIB:.2f} GiB more on {device} for its own models"


class ComfyHostBridge:
    """A residency ``HostListener`` that mirrors one target's residents into ComfyUI."""

    def __init__(self, target: ExecutionTarget) -> None:
        from comfy import model_management as mm

        self.target = target
        self._mm = mm
        self._entries: dict[str, Any] = {}

    def _device(self) -> Any:
        device = self._mm.get_torch_device()
        if self.target is ExecutionTarget.LOCAL_CPU and getattr(device, "type", device) != "cpu":
            import torch

            device = torch.device("cpu")
        return device

    def entries(self) -> list[Any]:
        return list(self._entries.values())

    # -- residency HostListener ----------------------------------------------
    def resident_loaded(self, info: ResidentInfo) -> None:
        """Put an entry for the new resident at the front of ComfyUI's list."""
        patcher_class, entry_class = _surface["classes"]
        device = self._device()
        placeholder = ResidentLLM(info, device)
        patcher = patcher_class(placeholder, device, device, size=info.resident_bytes)
        entry = entry_class(patcher, self)
        self._drop(info.profile_id)
        self._entries[info.profile_id] = entry
        self._mm.current_loaded_models.insert(0, entry)
        logger.info(
            "comfy-llm: %s is resident (%.2f GiB measured on %s); ComfyUI can unload it",
            info.repository,
            info.resident_bytes / _GIB,
            info.device,
        )

    def resident_unloaded(self, profile_id: str, *, by_host: bool) -> None:
        """Take the entry out of ComfyUI's list (ComfyUI pops the ones it unloaded)."""
        if by_host:
            return
        self._drop(profile_id)

    # -- ComfyUI's side ------------------------------------------------------
    def host_unload(self, entry: Any, memory_to_free: Any) -> bool:
        """``LoadedModel.model_unload``: unload the whole engine, or decline."""
        profile_id: str = entry.profile_id
        if profile_id not in self._entries or self._entries[profile_id] is not entry:
            return True  # already gone from comfy-llm: let ComfyUI drop the entry
        reason = _reason(memory_to_free, entry.device)
        manager = get_manager(self.target, backend_factory=create_backend)
        if not manager.evict_for_host(entry.profile_id, reason):
            logger.info(
                "comfy-llm: ComfyUI asked to unload %s while it is in use; declined",
                entry.repository,
            )
            return False
        self._entries.pop(entry.profile_id, None)
        logger.info("comfy-llm: unloaded %s for ComfyUI: %s", entry.repository, reason)
        return True

    def _drop(self, profile_id: str) -> None:
        entry = self._entries.pop(profile_id, None)
        if entry is None:
            return
        models = self._mm.current_loaded_models
        for index in range(len(models) - 1, -1, -1):
            if models[index] is entry:
                del models[index]
