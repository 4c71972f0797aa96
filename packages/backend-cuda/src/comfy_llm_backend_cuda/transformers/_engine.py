"""Lazy access to torch and transformers, and the device/dtype decisions.

Nothing here imports torch or transformers at module level: importing
``comfy_llm_backend_cuda`` must stay cheap and work without them.

Dtype policy (documented in the README):

* A ``torch_dtype`` backend option other than ``auto`` wins (the CPU
  registry sets ``float32``).
* Otherwise the checkpoint's declared dtype (``profile.dtype``) is used.
* On the CPU, 16-bit dtypes and ``auto`` become ``float32`` unless the option
  asked for them explicitly: half-precision matmuls on x86 CPUs are slow or
  unsupported, and the CPU registry's memory estimate already counts 4 bytes
  per weight.
* On CUDA, ``bfloat16`` becomes ``float16`` on GPUs without bf16 support;
  ``auto`` or an unknown name lets Transformers use the checkpoint's dtype.
"""

from __future__ import annotations

import dataclasses
import importlib
from types import ModuleType
from typing import Any

from comfy_llm_profiles import ModelProfile

from ..errors import ENGINE_NAME, EngineNotInstalledError

__all__ = ["DevicePlan", "import_engine", "plan_device"]

_KNOWN_DTYPES = ("float32", "float16", "bfloat16")
_ALIASES = {"float": "float32", "fp32": "float32", "half": "float16", "fp16": "float16"}
_ALIASES |= {"bf16": "bfloat16"}
_HALF = frozenset({"float16", "bfloat16"})


def import_engine() -> tuple[ModuleType, ModuleType]:
    """Import torch and transformers.

    Returns:
        ``(torch, transformers)``.

    Raises:
        EngineNotInstalledError: One of them is missing (an ``ImportError``
            that names the ``comfy-llm[cuda]`` extra).
    """
    modules = []
    for name in ("torch", "transformers"):
        try:
            modules.append(importlib.import_module(name))
        except ImportError as error:
            raise EngineNotInstalledError(ENGINE_NAME, name, str(error)) from error
    return modules[0], modules[1]


@dataclasses.dataclass(frozen=True, slots=True)
class DevicePlan:
    """Where and in which dtype a model runs.

    Attributes:
        device: ``"cuda"`` or ``"cpu"``.
        dtype_name: ``float32``, ``float16``, ``bfloat16`` or ``auto``.
        requested_dtype: What the profile asked for, before the device policy.
    """

    device: str
    dtype_name: str
    requested_dtype: str

    def torch_dtype(self, torch: ModuleType) -> Any:
        """Return the value for ``from_pretrained(dtype=...)``.

        Args:
            torch: The torch module.

        Returns:
            A ``torch.dtype``, or the string ``"auto"``.
        """
        if self.dtype_name == "auto":
            return "auto"
        return getattr(torch, self.dtype_name)


def _normalise(name: object) -> str:
    text = str(name).strip().lower().removeprefix("torch.")
    text = _ALIASES.get(text, text)
    return text if text in _KNOWN_DTYPES else "auto"


def plan_device(profile: ModelProfile, torch: ModuleType) -> DevicePlan:
    """Decide the device and dtype for a profile on this machine.

    The device is CUDA when ``torch.cuda.is_available()`` and the profile's
    ``device`` option is not ``cpu``; otherwise the CPU.

    Args:
        profile: The profile being loaded.
        torch: The torch module.

    Returns:
        The plan.
    """
    options = profile.options
    wanted_device = str(options.get("device", "")).strip().lower()
    device = "cuda" if wanted_device != "cpu" and torch.cuda.is_available() else "cpu"
    option_dtype = _normalise(options.get("torch_dtype", "auto"))
    explicit = option_dtype != "auto"
    requested = option_dtype if explicit else _normalise(profile.dtype)
    dtype = requested
    if device == "cpu":
        if not explicit and (requested in _HALF or requested == "auto"):
            dtype = "float32"
    elif requested == "bfloat16" and not torch.cuda.is_bf16_supported():
        dtype = "float16"
    return DevicePlan(device=device, dtype_name=dtype, requested_dtype=requested)
