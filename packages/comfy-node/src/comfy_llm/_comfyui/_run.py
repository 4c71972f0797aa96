"""The node's execute body: ``NodeInputs`` → one pipeline request → three strings.

Also what both nodes share around a run: the status preamble (:func:`node_status`)
and error presentation for ComfyUI (:func:`for_comfyui`, :func:`comfyui_errors`).
"""

from __future__ import annotations

import functools
import logging
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

from comfy_llm_core import ComfyLLMError, ErrorAction, redact, render_error
from comfy_llm_residency import DeviceOutOfMemoryError, InferenceResult

from comfy_llm._comfyui._glue import ComfyGlue, executing_prompt_id
from comfy_llm._comfyui._host_memory import host_bridge
from comfy_llm._comfyui._metadata import metadata_json
from comfy_llm._comfyui._node_inputs import NodeInputs
from comfy_llm._notes import NODE_WORDS, worded
from comfy_llm._pipeline import run_request
from comfy_llm._storage import register_model_folder, storage_root
from comfy_llm._targets import detect_target

__all__ = [
    "comfyui_errors",
    "for_comfyui",
    "hidden_node_id",
    "node_status",
    "run_node",
]

logger = logging.getLogger(__name__)


_PLAIN_KINDS: tuple[type[Exception], ...] = (
    FileNotFoundError,
    PermissionError,
    TimeoutError,
    ConnectionError,
    OSError,
    MemoryError,
    ModuleNotFoundError,
    ImportError,
    NotImplementedError,
    TypeError,
    ValueError,
    RuntimeError,
)
"""Builtin kinds an error may reach ComfyUI as; each reads its one argument as the text."""


def for_comfyui(error: Exception) -> Exception:
    """The exception ComfyUI gets for ``error``: ``error`` itself, or a plain builtin.

    ComfyUI 0.33 sends ``module.QualName`` of the raised class as the
    ``execution_error``'s ``exception_type`` (execution.py ``full_type_name``)
    and the frontend shows it; for a builtin it sends the bare name. So a
    comfy-llm error, whose class lives in a ``comfy_llm_*`` module, is re-raised
    as the builtin it derives from (``PromptTooLongError`` is a ``ValueError``;
    none: ``RuntimeError``) with its rendered message, and a note that names
    its class and action; an engine's out-of-memory is raised as ComfyUI's
    own out-of-memory class instead (:func:`_comfyui_out_of_memory`). Its class
    stays in the server log (the note, and the chained original). Other errors
    reach ComfyUI unchanged (its OOM handling looks at torch's class;
    ``InterruptProcessingException`` is its own), unless
    their text would show a Hub token. Any error whose text, or whose causes'
    text, holds a token is replaced and raised ``from None`` (the caller's
    :func:`comfyui_errors` does that), with the scrubbed traceback logged at
    debug level.
    """
    token = _shows_token(error)
    if not token and not isinstance(error, ComfyLLMError):
        return error
    kind = _comfyui_out_of_memory(error) or next(
        (base for base in type(error).__mro__ if base in _PLAIN_KINDS), RuntimeError
    )
    replacement = kind(render_error(error))
    action = ErrorAction(getattr(error, "action", ErrorAction.FATAL))
    name = f"{type(error).__module__}.{type(error).__qualname__}"
    replacement.add_note(f"comfy-llm error class: {name} (action: {action.value})")
    if token:
        logger.debug("Scrubbed error from the node:\n%s", redact(_format(error)))
    return replacement


def _comfyui_out_of_memory(error: Exception) -> type[Exception] | None:
    """ComfyUI's out-of-memory class for an engine's, when torch is loaded (it is in ComfyUI).

    ComfyUI treats an error as out of memory by its class (0.33 execution.py
    ``is_oom``: ``isinstance(e, torch.cuda.OutOfMemoryError)``,
    model_management.py ``OOM_EXCEPTION``), then adds its tip and unloads
    every model it holds, ours through the host bridge: what lets the next
    run fit. So a :class:`DeviceOutOfMemoryError` reaches it as that class.
    """
    torch = sys.modules.get("torch")
    if not isinstance(error, DeviceOutOfMemoryError) or torch is None:
        return None
    kind = getattr(getattr(torch, "cuda", None), "OutOfMemoryError", None)
    return kind if isinstance(kind, type) and issubclass(kind, Exception) else None


def _format(error: BaseException) -> str:
    return "".join(traceback.format_exception(error))


def _shows_token(error: BaseException) -> bool:
    """Whether ComfyUI's log of ``error`` (its text and chained traceback) would show a token."""
    full = _format(error)
    return redact(full) != full


_P = ParamSpec("_P")
_R = TypeVar("_R")


def comfyui_errors(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """Re-raise what ``function`` raises as :func:`for_comfyui` has it (node entry points).

    A replacement is chained to the original (ComfyUI logs the chain: the class
    and its traceback stay in the server log), except when the original's text
    shows a token: then ``from None``.
    """

    @functools.wraps(function)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return function(*args, **kwargs)
        except Exception as error:
            replacement = for_comfyui(error)
            if replacement is error:
                raise
            if _shows_token(error):
                raise replacement from None
            raise replacement from error

    return wrapper


def hidden_node_id(node: object) -> str | None:
    """The executing node's unique id (its hidden input), or None outside a prompt."""
    hidden = getattr(node, "hidden", None)
    return getattr(hidden, "unique_id", None) if hidden is not None else None


@contextmanager
def node_status(node_id: str | None, *, reasoning_enabled: bool) -> Iterator[ComfyGlue]:
    """One node run's glue, the preamble both nodes share.

    The previous run's status is replaced at once (:meth:`ComfyGlue.start`);
    whatever leaves the block replaces it with what stopped the run
    (:meth:`ComfyGlue.fail`: "Cancelled" or "Stopped: <message>") and goes on.
    """
    glue = ComfyGlue(node_id, reasoning_enabled=reasoning_enabled)
    glue.start()
    try:
        yield glue
    except BaseException as error:
        glue.fail(error)
        raise


@comfyui_errors
def run_node(inputs: NodeInputs, *, node_id: str | None) -> tuple[str, str, str]:
    """Run the node once; returns (response, metadata_json, reasoning).

    The node's status text is replaced at once (a run never shows the last
    run's words) and ends with the answer, or with why it is empty, or with
    what stopped the run.

    Raises:
        Exception: Whatever the pipeline raises, ComfyUI's
            ``InterruptProcessingException`` included, as :func:`for_comfyui`
            has it: a comfy-llm error (or any error whose text shows a Hub
            token) as a plain builtin with the rendered message.
    """
    with node_status(node_id, reasoning_enabled=inputs.enable_reasoning) as glue:
        result = _run(glue, inputs)
    metadata, message = worded(result.metadata, NODE_WORDS)
    glue.finish(result.response, result.reasoning, message)
    return result.response, metadata_json(metadata), result.reasoning


def _run(glue: ComfyGlue, inputs: NodeInputs) -> InferenceResult:
    root = storage_root()
    register_model_folder(root)
    target = detect_target()
    return run_request(
        inputs.request(target, root),
        progress=glue.progress,
        on_token=glue.on_token,
        free_host_memory=glue.free_memory,
        comfy_models=glue.loaded_model_names,
        prompt_id=executing_prompt_id(),
        host_listener=host_bridge(target),
        on_profile=glue.use_profile,
        check_interrupt=glue.check_interrupt,
    )
