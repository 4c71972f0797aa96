"""What both engines share: engine names, the LOAD reporter, Transformers' processor, chat."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from comfy_llm_core import (
    ProgressCallback,
    ProgressEvent,
    ProgressStage,
    env_scope,
    library_progress_bars_quiet,
)
from comfy_llm_profiles import ModelProfile

from .errors import ENGINE_NAME, VLLM_ENGINE_NAME, ModelLoadError

__all__ = [
    "ENGINE_NAME",
    "VLLM_ENGINE_NAME",
    "hide_library_bars",
    "load_processor",
    "load_reporter",
    "processor_class",
    "render_chat",
]


def load_reporter(progress: ProgressCallback, started: float) -> Callable[[str], None]:
    """An indeterminate LOAD reporter timed from ``started`` (both engines' loads use it)."""

    def report(message: str) -> None:
        progress(
            ProgressEvent(
                stage=ProgressStage.LOAD,
                message=message,
                indeterminate=True,
                elapsed_seconds=time.perf_counter() - started,
            )
        )

    return report


def _silent_bar(factory: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Transformers' tqdm hook: the bar still iterates but draws nothing while quiet."""
    if library_progress_bars_quiet():
        kwargs = {**kwargs, "disable": True}
    return factory(*args, **kwargs)


def hide_library_bars(transformers: Any) -> None:
    """Keep Transformers' own bars ("Loading weights: 0%|...") off a quiet CLI's stderr.

    The CLI shows progress through its own lines and keeps library output off
    stderr unless ``--debug`` (:func:`comfy_llm_core.library_progress_bars_quiet`).
    Only Transformers' bars are hooked (``set_tqdm_hook``, Transformers >= 5):
    ``disable_progress_bar()`` would also switch off huggingface_hub's bars
    process-wide. Nothing is installed when bars are wanted (ComfyUI's console).
    """
    set_hook = getattr(transformers.utils.logging, "set_tqdm_hook", None)
    if set_hook is not None and library_progress_bars_quiet():
        set_hook(_silent_bar)


def load_processor(transformers: Any, profile: ModelProfile, path: Path) -> Any:
    """Transformers' processor for a snapshot, local files only and no remote code.

    The host's environment is the same afterwards: a processor's first load
    imports its helpers, and OpenCV's loader (imported by mistral_common's
    tokenizers) writes ``LD_LIBRARY_PATH`` for every later child of ComfyUI.

    Raises:
        ModelLoadError: Transformers could not read the processor files.
    """
    try:
        with env_scope({}):
            return processor_class(transformers, profile.model_type).from_pretrained(
                str(path), local_files_only=True, trust_remote_code=False
            )
    except (OSError, ValueError, KeyError, TypeError) as error:
        where = (profile.backend, profile.profile_id, str(path))
        raise ModelLoadError(*where, "processor", str(error)) from error


def processor_class(transformers: Any, model_type: str) -> Any:
    """Transformers' own processor class for ``model_type``.

    Looked up in Transformers' mapping rather than through
    ``AutoProcessor.from_pretrained``: MLX-VLM replaces that classmethod
    process-wide when it loads some models (it then returns MLX processors),
    and a process may hold both engines.
    """
    from transformers.models.auto import processing_auto

    name = processing_auto.PROCESSOR_MAPPING_NAMES.get(model_type)
    if isinstance(name, str) and hasattr(transformers, name):
        return getattr(transformers, name)
    return transformers.AutoProcessor


def render_chat(
    processor: Any, messages: list[dict[str, Any]], template_kwargs: Mapping[str, object]
) -> str:
    """The chat template's output for ``messages`` (one conversation, one string).

    Both CUDA engines render with the processor's template (vLLM gets the
    text), so both share this fallback.

    Some templates read ``content`` as a string and write the image tokens
    themselves (JoyCaption Beta One's Llama 3.1 template calls
    ``content.replace``; reviews/llava.md): when typed parts make the
    template fail, the same conversation is rendered again with each
    content's text as a plain string. A template that fails both ways raises
    the first error.
    """

    def render(conversation: list[dict[str, Any]]) -> Any:
        return processor.apply_chat_template(
            conversation, tokenize=False, add_generation_prompt=True, **dict(template_kwargs)
        )

    try:
        rendered = render(messages)
    except Exception as error:  # jinja2 raises its own classes and the template's TypeErrors
        as_text = [
            {"role": message["role"], "content": _text_of(message["content"])}
            for message in messages
        ]
        try:
            rendered = render(as_text)
        except Exception:
            raise error from None
    # some processors return one string per conversation
    return rendered if isinstance(rendered, str) else _single(rendered)


def _text_of(content: Sequence[Mapping[str, Any]]) -> str:
    return "".join(str(part["text"]) for part in content if part.get("type") == "text")


def _single(rendered: Sequence[str]) -> str:
    return str(rendered[0])
