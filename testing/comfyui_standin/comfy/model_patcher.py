"""Stand-in for ``comfy.model_patcher.ModelPatcher`` (tests only).

The members ``model_management``'s walk and ``load_models_gpu`` touch, as
ComfyUI 0.33.0 spells them; "weights" are a byte count on the model.
"""

from __future__ import annotations

from typing import Any


class ModelPatcher:
    def __init__(
        self,
        model: Any,
        load_device: Any,
        offload_device: Any,
        size: int = 0,
        weight_inplace_update: bool = False,
    ) -> None:
        self.size = size
        self.model = model
        if getattr(self.model, "device", None) is None:
            self.model.device = offload_device
        self.load_device = load_device
        self.offload_device = offload_device
        self.parent = None
        if not hasattr(self.model, "model_loaded_weight_memory"):
            self.model.model_loaded_weight_memory = 0

    def is_dynamic(self) -> bool:
        return False

    def model_size(self) -> int:
        return self.size

    def loaded_size(self) -> int:
        return self.model.model_loaded_weight_memory

    def is_clone(self, other: Any) -> bool:
        return hasattr(other, "model") and self.model is other.model

    def current_loaded_device(self) -> Any:
        return self.model.device

    def partially_load(self, device_to: Any, extra_memory: float = 0, **_: Any) -> int:
        self.model.device = device_to
        self.model.model_loaded_weight_memory = self.size
        return self.size

    def detach(self, unpatch_all: bool = True) -> Any:
        self.model.device = self.offload_device
        self.model.model_loaded_weight_memory = 0
        return self.model
