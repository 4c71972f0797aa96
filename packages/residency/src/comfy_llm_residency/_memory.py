"""Memory probes: how much memory a cold load may use right now.

Apple Silicon and CPU load into host (unified) memory, measured with psutil;
CUDA and Modal load into VRAM, measured with ``torch.cuda.mem_get_info``.
torch is imported only inside :class:`CudaMemoryProbe`'s methods, so the
Apple install never imports it.
"""

from __future__ import annotations

import ctypes
import dataclasses
import gc
import sys
from typing import Protocol, runtime_checkable

import psutil
from comfy_llm_core import ExecutionTarget

from ._settings import coerce_target, uses_host_memory
from .errors import GIB, MemoryProbeError


@dataclasses.dataclass(frozen=True, slots=True)
class MemorySnapshot:
    """One reading of a device's memory.

    Attributes:
        available_bytes: Memory a new allocation could use now.
        total_bytes: Total memory of the device.
        device: What was measured, e.g. ``"cpu"``, ``"apple_unified"``, ``"cuda:0"``.
    """

    available_bytes: int
    total_bytes: int
    device: str

    @property
    def available_gb(self) -> float:
        """Available memory in GiB."""
        return self.available_bytes / GIB

    @property
    def total_gb(self) -> float:
        """Total memory in GiB."""
        return self.total_bytes / GIB


@runtime_checkable
class MemoryProbe(Protocol):
    """Measures one device's memory and clears the engine cache on it."""

    def snapshot(self) -> MemorySnapshot:
        """Read available and total memory now."""
        ...

    def clear_cache(self) -> None:
        """Return cached-but-unused memory to the device (after an unload)."""
        ...

    def allocated_bytes(self) -> int | None:
        """Memory this process holds on the device now, or None when unknown.

        The manager measures a load as the change of this reading (falling
        back to the change of ``available_bytes`` when it is None or shows
        nothing, e.g. an engine that allocates in a subprocess).
        """
        ...


class PsutilMemoryProbe:
    """Host/unified memory through ``psutil.virtual_memory()`` (Apple, CPU)."""

    def __init__(self, device: str = "cpu") -> None:
        """Create a probe.

        Args:
            device: The name reported in snapshots and metadata.
        """
        self.device = device

    def snapshot(self) -> MemorySnapshot:
        """Read ``available`` and ``total`` from psutil.

        Returns:
            The reading.
        """
        memory = psutil.virtual_memory()
        return MemorySnapshot(
            available_bytes=int(memory.available), total_bytes=int(memory.total), device=self.device
        )

    def clear_cache(self) -> None:
        """Collect garbage so freed Python objects release their buffers.

        Engine caches (MLX's) are cleared by the backend's ``unload``. On
        glibc, freed heap pages are then handed back to the OS, so the
        process's resident memory really drops after an unload.
        """
        gc.collect()
        _trim_heap()

    def allocated_bytes(self) -> int | None:
        """MLX's active memory when MLX is loaded (Apple), else the process RSS.

        Returns:
            Bytes this process holds now.
        """
        mlx_core = sys.modules.get("mlx.core")
        get_active = getattr(mlx_core, "get_active_memory", None)
        if self.device == "apple_unified" and callable(get_active):
            return int(get_active())
        return int(psutil.Process().memory_info().rss)


class CudaMemoryProbe:
    """VRAM through ``torch.cuda.mem_get_info`` (local CUDA, Modal).

    Available memory is the driver's free memory plus what torch's caching
    allocator holds reserved but unused in this process (the same view
    ComfyUI takes), since a load in this process can reuse it; for an engine
    in another process :meth:`snapshot_for_other_process` counts the
    driver's free memory only.
    """

    def __init__(self, device_index: int | None = None) -> None:
        """Create a probe.

        Args:
            device_index: The CUDA device; None means torch's current device.
        """
        self.device_index = device_index

    def _torch(self):  # type: ignore[no-untyped-def]
        try:
            import torch
        except ImportError as error:
            raise MemoryProbeError(
                "The CUDA memory probe needs torch, which is not installed; install "
                "comfy-llm with the 'cuda' extra or choose another execution target."
            ) from error
        if not torch.cuda.is_available():
            raise MemoryProbeError(
                "No CUDA device is available to measure; choose the local_cpu or "
                "local_apple execution target, or check the NVIDIA driver."
            )
        return torch

    def snapshot(self) -> MemorySnapshot:
        """Read free and total VRAM of the device.

        Returns:
            The reading, device ``"cuda:<index>"``.

        Raises:
            MemoryProbeError: When torch is missing or no CUDA device exists.
        """
        torch = self._torch()
        index = torch.cuda.current_device() if self.device_index is None else self.device_index
        free, total = torch.cuda.mem_get_info(index)
        reusable = torch.cuda.memory_reserved(index) - torch.cuda.memory_allocated(index)
        available = min(int(total), int(free) + max(0, int(reusable)))
        return MemorySnapshot(
            available_bytes=available, total_bytes=int(total), device=f"cuda:{index}"
        )

    def snapshot_for_other_process(self) -> MemorySnapshot:
        """What an engine in another process (vLLM's EngineCore) could allocate now.

        Only the driver's free memory counts: this process's cached-but-unused
        blocks are no room for another process, so they are returned to the
        driver first (``empty_cache``) and the reading leaves them out.

        Raises:
            MemoryProbeError: When torch is missing or no CUDA device exists.
        """
        torch = self._torch()
        gc.collect()
        torch.cuda.empty_cache()
        index = torch.cuda.current_device() if self.device_index is None else self.device_index
        free, total = torch.cuda.mem_get_info(index)
        return MemorySnapshot(
            available_bytes=int(free), total_bytes=int(total), device=f"cuda:{index}"
        )

    def clear_cache(self) -> None:
        """Collect garbage and return torch's cached CUDA blocks to the driver.

        Does nothing when torch was never imported (nothing could be cached).
        """
        gc.collect()
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available():
            torch.cuda.empty_cache()

    def allocated_bytes(self) -> int | None:
        """What torch's allocator holds allocated on the device in this process.

        Returns:
            ``torch.cuda.memory_allocated`` of the device.

        Raises:
            MemoryProbeError: When torch is missing or no CUDA device exists.
        """
        torch = self._torch()
        index = torch.cuda.current_device() if self.device_index is None else self.device_index
        return int(torch.cuda.memory_allocated(index))


def _trim_heap() -> None:
    """Return free heap pages to the OS where the C library can (glibc)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim(0)
    except (OSError, AttributeError):
        return


def probe_for_target(target: ExecutionTarget | str) -> MemoryProbe:
    """The default probe for an execution target.

    Args:
        target: The execution target.

    Returns:
        psutil for ``local_apple`` (device ``apple_unified``) and ``local_cpu``
        (device ``cpu``); CUDA for ``local_cuda`` and ``modal``.

    Raises:
        InvalidSettingError: When ``target`` is unknown.
    """
    resolved = coerce_target(target)
    if uses_host_memory(resolved):
        device = "apple_unified" if resolved == ExecutionTarget("local_apple") else "cpu"
        return PsutilMemoryProbe(device)
    return CudaMemoryProbe()
