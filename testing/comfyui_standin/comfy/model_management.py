"""Stand-in for ``comfy.model_management`` (tests only).

Records free_memory calls and lets a test raise the interrupt flag, exactly
as ComfyUI's POST /interrupt does.
"""

from __future__ import annotations

from typing import Any


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


def free_memory(
    memory_required: int, device: Any, keep_loaded: list[Any] | None = None
) -> list[Any]:
    free_memory_calls.append((int(memory_required), device))
    return []


def get_torch_device() -> str:
    return "cpu"


def loaded_models(only_currently_used: bool = False) -> list[Any]:
    return [entry.model for entry in current_loaded_models]


def soft_empty_cache(force: bool = False) -> None:
    return None


def reset() -> None:
    """Test helper: clear recorded state."""
    global interrupt_processing, interrupt_after_checks, _checks
    interrupt_processing = False
    interrupt_after_checks = None
    _checks = 0
    free_memory_calls.clear()
    current_loaded_models.clear()
