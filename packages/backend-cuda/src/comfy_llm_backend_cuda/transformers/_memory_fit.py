"""Out of CUDA memory while generating: run fewer prompts at once, or say what happened.

Admission counts a model's weights and one request's cache and activations.
Two things it cannot count: a caption batch's working memory, which grows
with its images (the GPU check on an H200, random-weight Qwen3.5-2B: 32
images of 1024² peaked 6.2 GiB above the weights, 1.4 times the whole
estimate), and memory another process takes after the load (ComfyUI's own
models). Then CUDA's caching allocator raises ``torch.OutOfMemoryError``
(``c10/cuda/CUDACachingAllocator.cpp``, ``malloc``'s out-of-memory branch)
and gives nothing back by itself.

A failed ``generate`` leaves nothing behind in the model (Transformers builds
its cache per call), so a group that runs out before its first token is run
again in halves once this process has given its cached blocks back, down to
one prompt. What no split can mend (one prompt, or tokens already streamed
to the node, which a re-run would repeat) becomes
:class:`~comfy_llm_backend_cuda.errors.GenerationOutOfMemoryError`, naming
what was free and what to do, instead of torch's allocator message.
"""

from __future__ import annotations

import dataclasses
import gc
import logging
from collections.abc import Callable
from types import ModuleType
from typing import TypeVar

from ..errors import GenerationOutOfMemoryError

__all__ = ["OutOfMemory", "attempt", "out_of_memory_error"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


@dataclasses.dataclass(frozen=True, slots=True)
class OutOfMemory:
    """A ``generate`` that ran out of CUDA memory (its cache already given back).

    Attributes:
        message: The first line of torch's error (what it tried to allocate).
    """

    message: str


def _is_out_of_memory(torch: ModuleType, error: BaseException) -> bool:
    kind = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", None)
    return isinstance(kind, type) and isinstance(error, kind)


def _give_back(torch: ModuleType) -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def attempt(torch: ModuleType, call: Callable[[], T]) -> T | OutOfMemory:
    """``call()``, or :class:`OutOfMemory` when CUDA ran out during it.

    The cache is given back only after the ``except`` block: until then the
    error's traceback holds the failed call's tensors.

    Raises:
        Exception: Whatever else ``call`` raised, unchanged.
    """
    try:
        return call()
    except Exception as error:
        if not _is_out_of_memory(torch, error):
            raise
        message = (str(error).splitlines() or [type(error).__name__])[0]
    _give_back(torch)
    return OutOfMemory(message)


def out_of_memory_error(
    torch: ModuleType, profile_id: str, rows: int, *, after_tokens: bool, failed: OutOfMemory
) -> GenerationOutOfMemoryError:
    """The error for a failure no split mends, with the device's memory read now."""
    logger.warning("CUDA out of memory for %s (%d at once): %s", profile_id, rows, failed.message)
    free = total = held = 0
    if torch.cuda.is_available():
        free, total = (int(value) for value in torch.cuda.mem_get_info())
        held = int(torch.cuda.memory_allocated())
    return GenerationOutOfMemoryError(
        profile_id, rows, free, total, held, after_tokens=after_tokens
    )
