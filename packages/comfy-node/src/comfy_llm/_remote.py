"""``run_on_modal``: the same request, run by the Modal dispatcher.

Modal (package and credentials) is checked first, so a machine without it
gets one clear error before any input is prepared. Inputs are then prepared
here with the modal profile's limits (frames, not whole videos) and only
they travel.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

from comfy_llm_core import ExecutionTarget, ProgressCallback, install_command
from comfy_llm_inputs import PreparedInputs
from comfy_llm_profiles import ModelProfile
from comfy_llm_residency import InferenceResult

from comfy_llm._request import LLMRequest
from comfy_llm._storage import installation_dir, storage_root
from comfy_llm._versions import note_served
from comfy_llm.errors import TargetUnavailableError

__all__ = ["modal_remote", "run_on_modal"]


def modal_remote() -> ModuleType:
    """The ``comfy_llm_modal_remote`` package, imported on first use.

    Raises:
        TargetUnavailableError: The ``modal`` extra is not installed.
    """
    try:
        import comfy_llm_modal_remote as remote
    except ModuleNotFoundError as error:
        if error.name != "comfy_llm_modal_remote":
            raise
        raise TargetUnavailableError(
            ExecutionTarget.MODAL.value,
            f"the Modal extra is not installed: install it into ComfyUI's Python with "
            f"`{install_command('modal')}`, run `modal token new` once, then queue the prompt "
            "again",
        ) from error
    note_served(remote)
    return remote


def run_on_modal(
    request: LLMRequest,
    *,
    prepare: Callable[[ModelProfile], PreparedInputs],
    progress: ProgressCallback,
    check_interrupt: Callable[[], None] | None,
    prompt_id: str | None,
) -> InferenceResult:
    """Run ``request`` on this installation's Modal app.

    Raises:
        TargetUnavailableError: The ``modal`` extra is not installed.
        ModalUnavailableError: ``modal`` or its credentials are missing.
        Exception: The remote error, with its original class and message.
    """
    remote = modal_remote()
    dispatcher = remote.connect(installation_dir(storage_root(request.storage_root)))
    run = remote.RemoteRun(
        model=request.model,
        prepare=prepare,
        settings=request.settings,
        gpu=request.modal_gpu,
        reserve_gb=request.reserve_gb,
        keep_loaded=request.keep_loaded,
        prompt_id=prompt_id,
    )
    return dispatcher.run(run, progress=progress, check_interrupt=check_interrupt or _never)


def _never() -> None:
    return None
