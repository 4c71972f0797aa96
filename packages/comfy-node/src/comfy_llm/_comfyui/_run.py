"""The node's execute body: node inputs → one pipeline request → three strings."""

from __future__ import annotations

import functools
import json
import logging
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

from comfy_llm_core import ComfyLLMError, ErrorAction, defaults, redact, render_error
from comfy_llm_residency import RunMetadata
from comfy_llm_residency.backend import GenerationSettings

from comfy_llm._comfyui._glue import ComfyGlue, executing_prompt_id
from comfy_llm._comfyui._host_memory import host_bridge
from comfy_llm._notes import NODE_WORDS, worded
from comfy_llm._pipeline import LLMRequest, run_request
from comfy_llm._storage import register_model_folder, storage_root

__all__ = [
    "comfyui_errors",
    "for_comfyui",
    "hidden_node_id",
    "metadata_json",
    "node_status",
    "reserve_for",
    "run_node",
]

logger = logging.getLogger(__name__)


def metadata_json(metadata: RunMetadata | dict[str, Any]) -> str:
    """A run's record (or a caption batch's summary) as ComfyUI's metadata_json.

    Indented JSON, key facts first and no disk paths (``_metadata``); tokens scrubbed.
    """
    from comfy_llm._comfyui._metadata import shown_metadata

    flat = metadata.to_dict() if isinstance(metadata, RunMetadata) else metadata
    shown = shown_metadata(flat)
    return redact(json.dumps(shown, indent=2, ensure_ascii=False, default=str))


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
    its class and action. Its class stays in the server log (the note, and the
    chained original). Other errors reach ComfyUI unchanged (its OOM handling
    looks at torch's class; ``InterruptProcessingException`` is its own), unless
    their text would show a Hub token. Any error whose text, or whose causes'
    text, holds a token is replaced and raised ``from None`` (the caller's
    :func:`comfyui_errors` does that), with the scrubbed traceback logged at
    debug level.
    """
    token = _shows_token(error)
    if not token and not isinstance(error, ComfyLLMError):
        return error
    kind = next((base for base in type(error).__mro__ if base in _PLAIN_KINDS), RuntimeError)
    replacement = kind(render_error(error))
    action = ErrorAction(getattr(error, "action", ErrorAction.FATAL))
    name = f"{type(error).__module__}.{type(error).__qualname__}"
    replacement.add_note(f"comfy-llm error class: {name} (action: {action.value})")
    if token:
        logger.debug("Scrubbed error from the node:\n%s", redact(_format(error)))
    return replacement


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


def hidden_node_id(node: Any) -> str | None:
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


def reserve_for(
    *, run_on_modal: bool, reserve_free_vram_gb: float, local_reserve_free_memory_gb: float
) -> float:
    """The GiB to keep free where the model loads, as a seed-era workflow means it.

    ``reserve_free_vram_gb`` is the seed node's: the reserve on the Modal GPU a
    request runs on. Every local target (Apple unified memory, CPU RAM, a local
    NVIDIA GPU's memory) takes ``local_reserve_free_memory_gb``, so a workflow
    saved with the seed's 24 GiB Modal reserve does not ask a desktop GPU for 24 GiB.
    """
    return reserve_free_vram_gb if run_on_modal else local_reserve_free_memory_gb


@comfyui_errors
def run_node(
    *,
    prompt: str,
    model_profile: str,
    node_id: str | None,
    enable_reasoning: bool = True,
    **inputs: Any,
) -> tuple[str, str, str]:
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
    with node_status(node_id, reasoning_enabled=enable_reasoning) as glue:
        result = _run(glue, prompt, model_profile, enable_reasoning=enable_reasoning, **inputs)
    metadata, message = worded(result.metadata, NODE_WORDS)
    glue.finish(result.response, result.reasoning, message)
    return result.response, metadata_json(metadata), result.reasoning


def _run(
    glue: ComfyGlue,
    prompt: str,
    model_profile: str,
    *,
    images: Any = None,
    video: Any = None,
    files: Any = None,
    system_prompt: str | None = "",
    max_new_tokens: int = defaults.MAX_NEW_TOKENS,
    enable_reasoning: bool = True,
    temperature: float = defaults.TEMPERATURE,
    top_p: float = defaults.TOP_P,
    seed: int | None = 0,
    video_frames: int = defaults.VIDEO_FRAMES,
    reserve_free_vram_gb: float = defaults.RESERVE_GB["modal"],
    keep_model_loaded: bool = True,
    local_reserve_free_memory_gb: float = defaults.RESERVE_GB["local_cpu"],
    run_on_modal: bool = False,
    modal_gpu: str = "L40S",
    response_schema: str = "",
) -> Any:
    root = storage_root()
    register_model_folder(root)
    settings = GenerationSettings(
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        top_p=top_p,
        seed=seed,
        enable_reasoning=enable_reasoning,
        response_schema=response_schema or None,
    )
    from comfy_llm._targets import detect_target

    target = detect_target()
    request = LLMRequest(
        model=model_profile.strip(),
        prompt=prompt,
        system_prompt=system_prompt or None,
        images=images,
        video=video,
        video_frames=video_frames,
        files=files,
        settings=settings,
        target=target.value,
        run_on_modal=run_on_modal,
        modal_gpu=modal_gpu,
        storage_root=root,
        reserve_gb=reserve_for(
            run_on_modal=run_on_modal,
            reserve_free_vram_gb=reserve_free_vram_gb,
            local_reserve_free_memory_gb=local_reserve_free_memory_gb,
        ),
        keep_loaded=keep_model_loaded,
    )
    return run_request(
        request,
        progress=glue.progress,
        on_token=glue.on_token,
        free_host_memory=glue.free_memory,
        comfy_models=glue.loaded_model_names,
        prompt_id=executing_prompt_id(),
        host_listener=host_bridge(target),
        on_profile=glue.use_profile,
        check_interrupt=glue.check_interrupt,
    )
