"""Everything that touches ComfyUI at run time, in one place.

* progress: typed :class:`ProgressEvent` stages drive one forward-only
  ``comfy.utils.ProgressBar`` per request: each stage with a real fraction
  fills the bar from where it stands to that stage's mark, the bar never moves
  back (ComfyUI >= 0.9 drops backward moves) and reaches 100 % once, in
  :meth:`ComfyGlue.finish` (stages without a fraction only update the live text);
* interruption: ``throw_exception_if_processing_interrupted()`` on every
  token and every progress event, so Cancel stops generation within a token;
* live text: the text generated so far goes to the node through
  ``PromptServer.instance.send_progress_text`` (throttled), labelled by what
  the model's parser can produce, the answer first;
* memory: ``comfy.model_management.free_memory`` is the admission hook (comfy-llm's
  own entries kept loaded: admission evicts those itself), and the names of
  ComfyUI-managed models go into telemetry; the other direction, ComfyUI
  unloading comfy-llm's models, is ``_host_memory``;
* the snapshot folder is registered as ComfyUI's ``modal_llm`` model folder.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from comfy_llm_profiles import ProgressEvent, ProgressStage

__all__ = ["ComfyGlue", "executing_prompt_id"]

_THINK_OPEN = "<think>"
_THINK_CLOSE = "</think>"
_BAR_STEPS = 1000
_STAGE_ENDS = {
    ProgressStage.INSPECT: 0.02,
    ProgressStage.DOWNLOAD: 0.50,
    ProgressStage.PREPARE_INPUTS: 0.55,
    ProgressStage.ADMISSION: 0.56,
    ProgressStage.LOAD: 0.60,
    ProgressStage.GENERATE: 0.99,
    ProgressStage.DONE: 0.99,
}
"""Where the bar stands when each stage ends. A stage with a fraction fills the
bar from its position at the stage's start to the stage's mark, so a skipped
stage (a warm model downloads nothing) leaves its share to the next one. Only
``finish`` fills the last percent: ComfyUI always sends a final value, so a
stage reaching 100 % early would show "done" while the model still works."""
LIVE_TEXT_MAX_CHARS = 4000
"""The live preview shows the tail of a long generation: every message is a
websocket frame, and resending a whole book per update would flood it."""


def _tail(text: str) -> str:
    if len(text) <= LIVE_TEXT_MAX_CHARS:
        return text
    return "…" + text[-LIVE_TEXT_MAX_CHARS:]


def _stage_text(stage: ProgressStage, message: str) -> str:
    """``"load: Loading model"``, without repeating a message that names its stage."""
    if not message:
        return stage.value
    first_word = message.split(":", 1)[0].strip().lower()
    if first_word == stage.value.replace("_", " "):
        return message
    return f"{stage.value}: {message}"


REASONING_PREVIEW_CHARS = 1200
"""Once the answer has started, the live text keeps only this much of the reasoning's
tail below it: the answer comes first so it is visible at the node's default size."""


def _compose(answer: str | None, reasoning: str | None) -> str:
    """``Answer:`` first (always shown), then the reasoning's tail when there is one."""
    if reasoning is None:
        return f"Answer:\n{_tail(answer or '')}"
    if answer is None:
        return f"Answer: (after the reasoning)\n\nReasoning:\n{_tail(reasoning)}"
    short = (
        reasoning
        if len(reasoning) <= REASONING_PREVIEW_CHARS
        else ("…" + reasoning[-REASONING_PREVIEW_CHARS:])
    )
    return f"Answer:\n{_tail(answer)}\n\nReasoning:\n{short}"


def _label_live_text(text: str, reasoning_open: bool, can_reason: bool = True) -> str:
    """Label generated-so-far text by what the model's parser can produce.

    A model without a reasoning parser only ever shows ``Answer:``; one with a
    parser shows its reasoning until ``</think>``, then the answer above it.
    """
    if not can_reason:
        return _compose(text.strip(), None)
    if _THINK_CLOSE in text:
        head, _, answer = text.partition(_THINK_CLOSE)
        return _compose(answer.strip(), head.replace(_THINK_OPEN, "").strip())
    if reasoning_open or _THINK_OPEN in text:
        return _compose(None, text.replace(_THINK_OPEN, "").strip())
    return _compose(text.strip(), None)


class ComfyGlue:
    """Binds one node execution to ComfyUI's progress, interrupt and memory hooks.

    Args:
        node_id: The node's unique id (hidden input), for the bar and live text.
        reasoning_enabled: Whether the live text starts inside the reasoning.
        text_interval: Seconds between live-text messages.
    """

    def __init__(
        self, node_id: str | None, *, reasoning_enabled: bool, text_interval: float = 0.25
    ) -> None:
        import comfy.utils
        from comfy import model_management

        self._mm = model_management
        self._node_id = node_id
        self._bar = comfy.utils.ProgressBar(_BAR_STEPS, node_id=node_id)
        self._reasoning_open = reasoning_enabled
        self._can_reason = True  # until the profile says which parser it has
        self._text_interval = text_interval
        self._last_text = 0.0
        self._last_stage: ProgressStage | None = None
        self._stage_from = 0.0  # bar position (0..1) when the current stage began
        self._bar_percent = -1  # last percent handed to the bar; only ever grows
        self._finished = False

    # -- hooks handed to the pipeline -------------------------------------
    def use_profile(self, profile: Any) -> None:
        """Label the live text by the resolved profile's reasoning parser."""
        parser = getattr(profile, "reasoning_parser", None)
        if parser == "none":
            self._can_reason = False
            self._reasoning_open = False

    def progress(self, event: ProgressEvent) -> None:
        """ProgressCallback: check for Cancel, move the bar, show the stage."""
        self._mm.throw_exception_if_processing_interrupted()
        fraction = event.fraction
        first_of_stage = event.stage is not self._last_stage
        if first_of_stage:
            self._last_stage = event.stage
            self._stage_from = max(0.0, self._bar_percent / 100)
            if self._bar_percent < 0:
                self._move_bar(0.0)  # the bar appears at once, empty
            if event.stage is not ProgressStage.GENERATE:
                self._send_text(_stage_text(event.stage, event.message), force=True)
        if fraction is not None:
            end = max(self._stage_from, _STAGE_ENDS.get(event.stage, self._stage_from))
            self._move_bar(self._stage_from + fraction * (end - self._stage_from))
        # Build the labelled text only when it will be sent: it grows with the answer.
        generating = event.stage is ProgressStage.GENERATE and event.text is not None
        if generating and (first_of_stage or self._text_due()):
            live = _label_live_text(event.text or "", self._reasoning_open, self._can_reason)
            self._send_text(live, force=True)

    def on_token(self, token_id: int, text: str) -> None:
        """TokenCallback: Cancel is honoured between any two tokens."""
        del token_id, text
        self._mm.throw_exception_if_processing_interrupted()

    def check_interrupt(self) -> None:
        """Raise ComfyUI's interrupt exception once Cancel was pressed."""
        self._mm.throw_exception_if_processing_interrupted()

    def free_memory(self, needed_bytes: int) -> None:
        """Ask ComfyUI to unload idle models until ``needed_bytes`` are free."""
        from comfy_llm._comfyui._host_memory import resident_entries

        device = self._mm.get_torch_device()
        self._mm.free_memory(needed_bytes, device, keep_loaded=resident_entries())

    def loaded_model_names(self) -> list[str]:
        """Class names of the models ComfyUI currently holds (telemetry)."""
        from comfy_llm._comfyui._host_memory import resident_entries

        ours = {id(entry) for entry in resident_entries()}
        names = []
        for loaded in getattr(self._mm, "current_loaded_models", []):
            if id(loaded) in ours:
                continue
            model = getattr(loaded, "model", loaded)
            inner = getattr(model, "model", model)
            names.append(type(inner).__name__)
        return names

    def finish(self, response: str, reasoning: str) -> None:
        """Fill the bar (once) and show the final, parsed channels."""
        if not self._finished:
            self._finished = True
            self._bar_percent = 100
            self._bar.update_absolute(_BAR_STEPS, _BAR_STEPS)
        self._send_text(_compose(response, reasoning or None), force=True)

    # -- helpers ------------------------------------------------------------
    def _move_bar(self, position: float) -> None:
        """Move the bar forward to ``position`` (0..1), at most one call per percent.

        Below 100 %: the final value belongs to :meth:`finish`.
        """
        percent = min(99, int(position * 100))
        if percent <= self._bar_percent or self._finished:
            return
        self._bar_percent = percent
        self._bar.update_absolute(percent * _BAR_STEPS // 100, _BAR_STEPS)

    def _text_due(self) -> bool:
        return time.monotonic() - self._last_text >= self._text_interval

    def _send_text(self, text: str, *, force: bool = False) -> None:
        if not force and not self._text_due():
            return
        self._last_text = time.monotonic()
        if self._node_id is None:
            return
        try:
            from server import PromptServer
        except ImportError:  # pragma: no cover - always present inside ComfyUI
            return
        server = getattr(PromptServer, "instance", None)
        send: Callable[..., Any] | None = getattr(server, "send_progress_text", None)
        if send is not None:
            send(text, self._node_id)


def executing_prompt_id() -> str | None:
    """The prompt id ComfyUI is executing, when it tells."""
    try:
        from comfy_execution.utils import get_executing_context
    except ImportError:
        return None
    context = get_executing_context()
    return getattr(context, "prompt_id", None) if context is not None else None
