"""Stand-in for ``comfy.model_management`` (tests only).

Records free_memory calls and lets a test raise the interrupt flag, exactly
as ComfyUI's POST /interrupt does. ``LoadedModel``, the walk of
``free_memory`` over ``current_loaded_models``, ``unload_all_models`` and the
freeing part of ``load_models_gpu`` are copied from ComfyUI 0.33.0's contract
(same names, order, sort key and pop-after-walk), without smart-memory,
dynamic-VRAM, pinning and low-VRAM details.
"""

from __future__ import annotations

import logging
import sys
import weakref
from typing import Any

import psutil


class InterruptProcessingException(BaseException):
    """Raised by throw_exception_if_processing_interrupted once interrupted.

    A ``BaseException`` as in ComfyUI 0.33 (PR #13523): ``except Exception``
    cleanup does not see it.
    """


interrupt_processing = False
free_memory_calls: list[tuple[int, Any]] = []
current_loaded_models: list[Any] = []
# A test can set this to a callable(count_of_checks) -> bool to interrupt later.
interrupt_after_checks: int | None = None
_checks = 0


def interrupt_current_processing(value: bool = True) -> None:
    global interrupt_processing
    interrupt_processing = value


def processing_interrupted() -> bool:
    return interrupt_processing


def throw_exception_if_processing_interrupted() -> None:
    global interrupt_processing, _checks
    _checks += 1
    if interrupt_after_checks is not None and _checks >= interrupt_after_checks:
        interrupt_processing = True
    if interrupt_processing:
        interrupt_processing = False
        raise InterruptProcessingException()


torch_device = "cpu"
"""What get_torch_device returns; a test sets e.g. "mps" to model a GPU device."""
free_bytes: dict[Any, int] = {}
"""A test may script get_free_memory per device; else psutil's available memory."""


class LoadedModel:
    def __init__(self, model: Any) -> None:
        self._model = weakref.ref(model)
        self.device = model.load_device
        self.real_model: Any = None
        self.currently_used = True
        self.model_finalizer: Any = None

    @property
    def model(self) -> Any:
        return self._model()

    def model_memory(self) -> int:
        return self.model.model_size()

    def model_loaded_memory(self) -> int:
        return self.model.loaded_size()

    def model_offloaded_memory(self) -> int:
        return self.model.model_size() - self.model.loaded_size()

    def model_memory_required(self, device: Any) -> int:
        if device == self.model.current_loaded_device():
            return self.model_offloaded_memory()
        return self.model_memory()

    def model_load(self, lowvram_model_memory: int = 0, force_patch_weights: bool = False) -> Any:
        self.model.partially_load(self.device, lowvram_model_memory or 1e32)
        real_model = self.model.model
        self.real_model = weakref.ref(real_model)
        self.model_finalizer = weakref.finalize(real_model, cleanup_models)
        return real_model

    def model_unload(self, memory_to_free: Any = None, unpatch_weights: bool = True) -> bool:
        self.model.detach(unpatch_weights)
        self.model_finalizer.detach()
        self.model_finalizer = None
        self.real_model = None
        return True

    def __eq__(self, other: object) -> bool:
        return self.model is getattr(other, "model", None)

    def is_dead(self) -> bool:
        return self.real_model() is not None and self.model is None


def get_torch_device() -> Any:
    return torch_device


def get_all_torch_devices(exclude_current: bool = False) -> list[Any]:
    return [] if exclude_current else [get_torch_device()]


def get_free_memory(dev: Any = None, torch_free_too: bool = False) -> Any:
    dev = get_torch_device() if dev is None else dev
    free = free_bytes.get(dev, psutil.virtual_memory().available)
    return (free, free) if torch_free_too else free


def free_memory(
    memory_required: float,
    device: Any,
    keep_loaded: list[Any] = [],  # ComfyUI's own default
    for_dynamic: bool = False,
    pins_required: int = 0,
    ram_required: int = 0,
) -> list[Any]:
    free_memory_calls.append((int(min(memory_required, sys.maxsize)), device))
    unloaded_model = []
    can_unload = []
    unloaded_models = []
    for i in range(len(current_loaded_models) - 1, -1, -1):
        shift_model = current_loaded_models[i]
        if device is None or shift_model.device == device:  # noqa: SIM102 - as ComfyUI nests it
            if shift_model not in keep_loaded and not shift_model.is_dead():
                can_unload.append(
                    (
                        -shift_model.model_offloaded_memory(),
                        sys.getrefcount(shift_model.model),
                        shift_model.model_memory(),
                        i,
                    )
                )
                shift_model.currently_used = False
    for x in sorted(can_unload):
        i = x[-1]
        memory_to_free = 0 if device is None else memory_required - get_free_memory(device)
        if current_loaded_models[i].model.is_dynamic() and for_dynamic:
            memory_to_free = 0
        if memory_to_free > 0 and current_loaded_models[i].model_unload(memory_to_free):
            logging.debug(f"Unloading {current_loaded_models[i].model.model.__class__.__name__}")
            unloaded_model.append(i)
    for i in sorted(unloaded_model, reverse=True):
        unloaded_models.append(current_loaded_models.pop(i))
    return unloaded_models


def load_models_gpu(models: list[Any], memory_required: int = 0, **_: Any) -> None:
    """The room-making part: free ``free_memory`` for each non-CPU device, then load."""
    to_load = []
    for x in models:
        loaded_model = LoadedModel(x)
        if loaded_model in current_loaded_models:
            loaded = current_loaded_models[current_loaded_models.index(loaded_model)]
            loaded.currently_used = True
            to_load.append(loaded)
        else:
            to_load.append(loaded_model)
    total_memory_required: dict[Any, float] = {}
    for loaded_model in to_load:
        device = loaded_model.device
        total_memory_required[device] = total_memory_required.get(
            device, 0
        ) + loaded_model.model_memory_required(device)
    for device, required in total_memory_required.items():
        if device != "cpu":
            free_memory(required * 1.1 + memory_required, device)
    for loaded_model in to_load:
        loaded_model.model_load()
        if loaded_model in current_loaded_models:
            current_loaded_models.remove(loaded_model)
        current_loaded_models.insert(0, loaded_model)


def unload_all_models() -> None:
    for device in get_all_torch_devices():
        free_memory(1e30, device)


def cleanup_models() -> None:
    for i in range(len(current_loaded_models) - 1, -1, -1):
        if current_loaded_models[i].real_model() is None:
            current_loaded_models.pop(i)


def loaded_models(only_currently_used: bool = False) -> list[Any]:
    return [entry.model for entry in current_loaded_models]


def soft_empty_cache(force: bool = False) -> None:
    return None


def reset() -> None:
    """Test helper: clear recorded state."""
    global interrupt_processing, interrupt_after_checks, _checks, torch_device
    torch_device = "cpu"
    free_bytes.clear()
    interrupt_processing = False
    interrupt_after_checks = None
    _checks = 0
    free_memory_calls.clear()
    current_loaded_models.clear()
