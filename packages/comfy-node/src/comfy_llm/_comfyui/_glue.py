"""Everything that touches ComfyUI at run time, in one place.

* progress: each phase of a request shows its own real fraction on the node's
  bar: the download its bytes, generation its tokens against max_new_tokens,
  a caption batch its images; a phase without a fraction (checking the model,
  loading) shows an empty bar, which is as much as is known. Every phase starts
  a fresh ``comfy.utils.ProgressBar`` (ComfyUI sends a bar's first value at
  once and drops later backward moves of the same bar) and stops short of
  100 %: only :meth:`ComfyGlue.finish` fills it, once, at the end;
* status: one line of plain words per phase ("Checking the model",
  "Downloading", "Loading", "Thinking", "Answering") with the event's detail,
  never an internal id (a profile id, a commit, a target's key) and never an
  invisible character: the node's text area (``web/comfy-llm.js``) wraps at
  spaces only, so a number stays whole without word joiners; a run replaces
  the previous run's text from its first moment (:meth:`start`) to its last
  (:meth:`finish` or :meth:`fail`);
* interruption: ``throw_exception_if_processing_interrupted()`` on every
  token and every progress event, so Cancel stops generation within a token;
* live text: the last lines of the text generated so far (bounded, so the
  node keeps its size), split by the request's own reasoning parser with the
  ``<think>`` state the backend reported for the rendered prompt (the split the
  outputs get: ``comfy_llm_reasoning.live_split``), the answer first; the
  final text is the parsed outputs, with a note when the answer is empty or
  cut (``_notes``);
* memory: ``comfy.model_management.free_memory`` is the admission hook (comfy-llm's
  own entries kept loaded: admission evicts those itself), and the names of
  ComfyUI-managed models go into telemetry; the other direction, ComfyUI
  unloading comfy-llm's models, is ``_host_memory``;
* the snapshot folder is registered as ComfyUI's ``modal_llm`` model folder.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from comfy_llm_core import ProgressEvent, ProgressStage, render_error
from comfy_llm_profiles import ModelProfile
from comfy_llm_reasoning import LiveSplit, live_split

from comfy_llm._comfyui._host_memory import resident_entries

__all__ = ["LIVE_TEXT_MAX_CHARS", "LIVE_TEXT_MAX_LINES", "ComfyGlue", "executing_prompt_id"]

_BAR_STEPS = 1000
_PHASE_STAGES = (
    ProgressStage.DOWNLOAD,
    ProgressStage.LOAD,
    ProgressStage.ENGINE,
    ProgressStage.GENERATE,
)
"""Stages that get a bar of their own, in order; the others only change the status
line. A phase never goes back to an earlier one: a caption batch's per-image
"Using resident" load does not empty the bar that counts its images."""
_PLAIN_WORDS = {
    ProgressStage.INSPECT: "Checking the model",
    ProgressStage.DOWNLOAD: "Downloading",
    ProgressStage.PREPARE_INPUTS: "Reading the inputs",
    ProgressStage.ADMISSION: "Making room in memory",
    ProgressStage.LOAD: "Loading",
    ProgressStage.ENGINE: "Preparing the engine",
    ProgressStage.GENERATE: "Answering",
    ProgressStage.DONE: "Finishing",
}
LIVE_TEXT_MAX_LINES = 12
LIVE_TEXT_MAX_CHARS = 900
"""The live text shows the tail of a long generation, at most this many lines and
characters: the node keeps its size and the newest words stay in view."""
REASONING_PREVIEW_CHARS = 240
"""Once the answer has started, only this much of the reasoning's tail stays below it."""

_INTERNAL_ID = re.compile(r"@[0-9a-f]{7,64}\b|\b(?:hf|local)-[0-9a-f]{16,64}\b|\b[0-9a-f]{32,64}\b")
"""Commits (``@<hex>``), profile ids and other long hex ids: nothing an artist acts on."""
_CHECKING_WORDS = ("Hashing",)
"""While checking the model only these details are shown (a slow first use of a
folder); the others name profile ids, commits and target keys."""


def _plain(text: str) -> str:
    """``text`` without internal ids (and the spaces and brackets they leave)."""
    text = _INTERNAL_ID.sub("", text)
    return re.sub(r"\(\s*\)|\s{2,}", " ", text).replace(" )", ")").strip()


def _nothing_downloads(stage: ProgressStage, message: str) -> bool:
    """Staging's one event for a snapshot used as it is ("already staged", "in place")."""
    lowered = message.lower()
    return stage is ProgressStage.DOWNLOAD and ("already" in lowered or "in place" in lowered)


def _words(stage: ProgressStage, message: str) -> str:
    """The activity's plain word; "Already downloaded" where nothing downloads."""
    if _nothing_downloads(stage, message):
        return "Already downloaded"
    return _PLAIN_WORDS.get(stage, "Working")


def _status(stage: ProgressStage, message: str, unit: str = "") -> str:
    """``"Loading"`` plus the event's own words, when they add something."""
    if unit == "images":  # a caption batch: "Captioned 2/5 images (name)" says it all
        return _plain(message)
    words = _words(stage, message)
    detail = _plain(message)
    if _nothing_downloads(stage, message):  # "Using the local folder in place" says it
        return words if "already" in detail.lower() else detail
    if stage is ProgressStage.INSPECT and not detail.startswith(_CHECKING_WORDS):
        return words
    if not detail:
        return words
    if detail.split()[0].lower() == words.split()[0].lower():  # "Loading model": no "Loading: "
        return detail
    return f"{words}: {detail}"


def _tail(text: str, max_chars: int = LIVE_TEXT_MAX_CHARS) -> str:
    """The last lines of ``text`` within the line and character bounds."""
    lines = text.splitlines()
    cut = len(lines) > LIVE_TEXT_MAX_LINES
    kept = "\n".join(lines[-LIVE_TEXT_MAX_LINES:]) if cut else text
    if len(kept) > max_chars:
        kept, cut = kept[-max_chars:], True
    return "…" + kept if cut else kept


def _compose(answer: str | None, reasoning: str | None, note: str | None = None) -> str:
    """``Answer:`` first (always shown), then the reasoning's tail when there is one."""
    if note:  # first: the node's text box shows its first line without scrolling
        shown = f"Answer:\n{_tail(answer)}" if answer else "Answer: (empty)"
        if not reasoning:
            return f"{note}\n\n{shown}"
        return f"{note}\n\n{shown}\n\nReasoning:\n{_tail(reasoning, REASONING_PREVIEW_CHARS)}"
    if reasoning is None:
        return f"Answer:\n{_tail(answer or '')}"
    if answer is None:
        thinking = "Thinking… (the answer comes after the reasoning)"
        return f"{thinking}\n\nReasoning:\n{_tail(reasoning)}" if reasoning else thinking
    return f"Answer:\n{_tail(answer)}\n\nReasoning:\n{_tail(reasoning, REASONING_PREVIEW_CHARS)}"


def _label_live_text(split: LiveSplit) -> str:
    """Label generated-so-far text as the reasoning parser splits it (``live_split``)."""
    if split.thinking:
        return _compose(None, split.reasoning or "")
    return _compose(split.response, split.reasoning or None)


class ComfyGlue:
    """Binds one node execution to ComfyUI's progress, interrupt and memory hooks.

    Args:
        node_id: The node's unique id (hidden input), for the bar and live text.
        reasoning_enabled: The request's ``enable_reasoning`` (the parser's choice).
        text_interval: Seconds between live-text messages.
    """

    def __init__(
        self, node_id: str | None, *, reasoning_enabled: bool, text_interval: float = 0.25
    ) -> None:
        import comfy.utils
        from comfy import model_management

        self._mm = model_management
        self._new_bar: Callable[[], Any] = lambda: comfy.utils.ProgressBar(
            _BAR_STEPS, node_id=node_id
        )
        self._node_id = node_id
        self._bar: Any = None
        self._bar_steps = -1  # last value handed to the current bar
        self._reasoning_enabled = reasoning_enabled
        # (reasoning_parser, architecture) of the resolved profile: the parser's selection
        self._parser_of: tuple[str | None, str | None] = (None, None)
        self._text_interval = text_interval
        self._last_text = 0.0
        self._shown = ""  # the text the node shows now
        self._last_stage: ProgressStage | None = None
        self._phase: ProgressStage | None = None
        self._finished = False
        self._activity: str | None = None  # last label handed to set_activity

    # -- hooks handed to the pipeline -------------------------------------
    def start(self, words: str = "Starting") -> None:
        """Replace the previous run's status at once, and show an empty bar."""
        self._new_phase()
        self._send_text(words, force=True)

    def use_profile(self, profile: ModelProfile) -> None:
        """Split the live text with the resolved profile's reasoning parser."""
        self._parser_of = (profile.reasoning_parser, profile.architecture)

    def progress(self, event: ProgressEvent) -> None:
        """ProgressCallback: check for Cancel, move the bar, show the stage."""
        self._mm.throw_exception_if_processing_interrupted()
        first_of_stage = event.stage is not self._last_stage
        self._last_stage = event.stage
        if first_of_stage and event.stage in _PLAIN_WORDS:
            self._set_activity(_words(event.stage, event.message))
        if event.stage in _PHASE_STAGES and self._later_phase(event.stage):
            self._phase = event.stage
            self._new_phase()
        fraction = event.fraction
        if fraction is not None and event.stage is self._phase:
            self._move_bar(fraction)
        if event.stage is ProgressStage.GENERATE and event.text is not None:
            # Build the labelled text only when it will be sent: it grows with the answer.
            if first_of_stage or self._text_due():
                self._send_text(_label_live_text(self._live_split(event)), force=True)
        elif event.stage is not ProgressStage.DONE and (first_of_stage or event.message):
            # caption batches report "Captioned 2/5 images (name)" as they go
            force = first_of_stage or event.unit == "images"  # each image's status is shown
            self._send_text(_status(event.stage, event.message, event.unit), force=force)

    def on_token(self, token_id: int, text: str) -> None:
        """TokenCallback: Cancel is honoured between any two tokens."""
        del token_id, text
        self._mm.throw_exception_if_processing_interrupted()

    def check_interrupt(self) -> None:
        """Raise ComfyUI's interrupt exception once Cancel was pressed."""
        self._mm.throw_exception_if_processing_interrupted()

    def free_memory(self, needed_bytes: int) -> None:
        """Ask ComfyUI to unload idle models until ``needed_bytes`` are free."""
        device = self._mm.get_torch_device()
        self._mm.free_memory(needed_bytes, device, keep_loaded=resident_entries())

    def loaded_model_names(self) -> list[str]:
        """Class names of the models ComfyUI currently holds (telemetry)."""
        ours = {id(entry) for entry in resident_entries()}
        names = []
        for loaded in getattr(self._mm, "current_loaded_models", []):
            if id(loaded) in ours:
                continue
            model = getattr(loaded, "model", loaded)
            inner = getattr(model, "model", model)
            names.append(type(inner).__name__)
        return names

    def finish(self, response: str, reasoning: str, note: str | None = None) -> None:
        """Fill the bar (once) and show the final, parsed channels (and why one is empty)."""
        self.complete(_compose(response, reasoning or None, note))

    def complete(self, text: str) -> None:
        """Fill the bar, once, and leave ``text`` on the node (a caption batch's summary)."""
        self._set_activity(None)
        if not self._finished:
            if self._bar is None:
                self._new_phase()
            self._finished = True
            self._bar.update_absolute(_BAR_STEPS, _BAR_STEPS)
        # always sent, even when the live text already says the same: the run's last
        # message is its result (the frontend and the tests read the last one)
        self._send_text(text, force=True, repeat=True)

    def fail(self, error: BaseException) -> None:
        """Replace the status with what stopped this run (ComfyUI shows the error itself)."""
        self._set_activity(None)
        if isinstance(error, self._mm.InterruptProcessingException):
            self._send_text("Cancelled", force=True)
        else:
            # the message in plain words (tokens scrubbed); the class is not for the artist
            self._send_text(f"Stopped: {render_error(error)}", force=True)

    # -- helpers ------------------------------------------------------------
    def _live_split(self, event: ProgressEvent) -> LiveSplit:
        """The text so far, split as the outputs will be.

        The same parser, and the same ``<think>`` state of the rendered prompt
        (the backend's report; an engine that did not report it is taken as
        not having opened one).
        """
        reasoning_parser, architecture = self._parser_of
        return live_split(
            event.text or "",
            reasoning_parser=reasoning_parser,
            architecture=architecture,
            enable_reasoning=self._reasoning_enabled,
            prompt_opened_reasoning=bool(event.prompt_opened_reasoning),
        )

    def _later_phase(self, stage: ProgressStage) -> bool:
        if self._phase is None:
            return True
        return _PHASE_STAGES.index(stage) > _PHASE_STAGES.index(self._phase)

    def _new_phase(self) -> None:
        """A fresh bar for a new phase, shown empty at once."""
        if self._finished:
            return
        self._bar = self._new_bar()
        self._bar_steps = 0
        self._bar.update_absolute(0, _BAR_STEPS)

    def _move_bar(self, fraction: float) -> None:
        """Move this phase's bar to ``fraction`` (at most 99 %: the end belongs to finish)."""
        steps = min(_BAR_STEPS - 10, int(fraction * 100) * 10)  # whole percents: one call each
        if steps <= self._bar_steps or self._finished or self._bar is None:
            return
        self._bar_steps = steps
        self._bar.update_absolute(steps, _BAR_STEPS)

    def _set_activity(self, activity: str | None) -> None:
        """Label what the node is spending time on in ComfyUI's progress state (or clear it).

        ``ProgressRegistry.set_activity(node_id, activity)`` is newer than 0.33
        (upstream ``comfy_execution/progress.py``, after 0.33; the frontend shows
        the label beside the node's bar). Older ComfyUI has no such method, or
        (before 0.33's progress registry) no ``comfy_execution.progress`` at
        all: then nothing is labelled and the status text alone says the phase.
        """
        if self._node_id is None or activity == self._activity:
            return
        self._activity = activity
        try:
            from comfy_execution.progress import get_progress_state
        except ImportError:
            return
        set_activity: Callable[..., Any] | None = getattr(
            get_progress_state(), "set_activity", None
        )
        if set_activity is not None:
            set_activity(self._node_id, activity)

    def _text_due(self) -> bool:
        return time.monotonic() - self._last_text >= self._text_interval

    def _send_text(self, text: str, *, force: bool = False, repeat: bool = False) -> None:
        if (text == self._shown and not repeat) or (not force and not self._text_due()):
            return
        self._last_text = time.monotonic()
        self._shown = text
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
