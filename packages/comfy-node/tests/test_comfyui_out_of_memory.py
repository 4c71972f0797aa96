"""An engine's out-of-memory reaches ComfyUI as ComfyUI's own out-of-memory.

ComfyUI 0.33 decides that a node ran out of memory by the error's class
(execution.py ``if comfy.model_management.is_oom(ex)``; model_management.py
``OOM_EXCEPTION = torch.cuda.OutOfMemoryError`` and ``is_oom``'s
``isinstance``), then logs its memory summary, adds its tip and calls
``unload_all_models()``, which frees its diffusion models (and ours, through
the host bridge) so the next run fits. A comfy-llm error otherwise reaches
ComfyUI as a plain builtin, which would skip all of that.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch
from comfy_llm_backend_cuda.errors import GenerationOutOfMemoryError, PromptTooLongError

GIB = 1024**3


@pytest.fixture
def run(comfyui: Path) -> ModuleType:
    """The node's run module (it imports ComfyUI's API: the stand-in's here)."""
    from comfy_llm._comfyui import _run

    return _run


def _out_of_memory() -> GenerationOutOfMemoryError:
    return GenerationOutOfMemoryError(
        "hf-abc", 1, int(1.43 * GIB), int(139.8 * GIB), int(7.9 * GIB), after_tokens=False
    )


def test_an_engine_out_of_memory_is_comfyuis_out_of_memory_class(run: ModuleType) -> None:
    error = _out_of_memory()
    shown = run.for_comfyui(error)
    assert isinstance(shown, torch.cuda.OutOfMemoryError)  # what is_oom checks
    assert "1.43 GiB of 139.80 GiB was free" in str(shown) and "Free it" in str(shown)
    assert "comfy_llm" not in str(shown)  # the message, not the class path
    assert shown.__notes__ == [
        "comfy-llm error class: comfy_llm_backend_cuda.errors.GenerationOutOfMemoryError "
        "(action: retry)"
    ]


def test_the_node_entry_point_raises_it_chained_to_the_original(run: ModuleType) -> None:
    @run.comfyui_errors
    def node() -> None:
        raise _out_of_memory()

    with pytest.raises(torch.cuda.OutOfMemoryError) as caught:
        node()
    assert isinstance(caught.value.__cause__, GenerationOutOfMemoryError)


def test_without_torch_loaded_it_stays_a_memory_error(
    run: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    shown = run.for_comfyui(_out_of_memory())
    assert type(shown) is MemoryError


def test_other_errors_keep_their_builtin_kind(run: ModuleType) -> None:
    assert type(run.for_comfyui(PromptTooLongError(5000, 4096))) is ValueError
