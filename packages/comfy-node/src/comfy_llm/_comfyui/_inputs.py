"""The widgets both nodes share, defined once, and the record that lists a node's inputs.

``ModalLLM`` and ``ComfyLLMCaption`` ask the same things (prompt, model,
system prompt, sampling, seed, residency, schema). Each widget is built here
so the two nodes cannot drift apart in spelling, ranges or help text. A node
lists its inputs as one frozen record (``NodeInputs``, ``CaptionInputs``):
each field is a widget (:func:`widget`) whose name and default are the
field's, in the field's order. The record is both the schema
(:func:`schema_inputs`) and what the run receives (``execute(**values)``
builds it), so
the widget list and the run's parameters cannot disagree. Saved
``widgets_values`` are positional: a new field only ever goes last.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Final, TypeVar

from comfy_api.latest import io
from comfy_llm_core import defaults, install_command
from comfy_llm_residency.backend import GenerationSettings

from comfy_llm._picker import chosen_model, model_choices

__all__ = [
    "DEFAULT_MODEL",
    "MODAL_GPUS",
    "MODEL_LABELS",
    "SEARCH_ALIASES",
    "SHARED_WIDGETS",
    "SharedInputs",
    "WidgetBuilder",
    "custom_model_input",
    "enable_reasoning_input",
    "keep_model_loaded_input",
    "media_input",
    "max_new_tokens_input",
    "modal_gpu_input",
    "modal_workers_input",
    "model_input",
    "prompt_input",
    "request_inputs",
    "response_schema_input",
    "run_on_modal_input",
    "schema_inputs",
    "seed_input",
    "shared",
    "supported",
    "system_prompt_input",
    "temperature_input",
    "top_p_input",
    "widget",
]

DEFAULT_MODEL = "smolvlm-256m-instruct"
"""The model a new node starts with: the curated SmolVLM 256M (commit-pinned, reviewed for
every target, small enough for any machine). Saved workflows keep their own value."""
MODEL_LABELS = "comfy_llm_labels"
"""The picker's input-spec key holding ``{value: label}``, read by ``web/comfy-llm.js``."""

SEARCH_ALIASES = ["LLM", "VLM", "caption", "describe", "vision", "multimodal", "chat"]
MAX_NEW_TOKENS_LIMIT = 32768
MODAL_GPUS = ("L4", "L40S", "A100-40GB", "A100-80GB", "H100", "H200", "B200", "RTX-PRO-6000")


_T = TypeVar("_T")

WIDGET: Final = "comfy_llm_widget"
"""The field-metadata key holding a field's widget builder."""


WidgetBuilder = Callable[..., io.Input]
"""Builds one ComfyUI input: ``build(name, default, **options)``."""


REQUEST_INPUT: Final = "comfy_llm_request_input"
"""The field-metadata key marking a field as one of the request's inputs (``LLMRequest.inputs``)."""


def widget(
    default: _T, build: WidgetBuilder, *, request_input: bool = False, **options: object
) -> _T:
    """A record field shown as ``build(name, default, **options)``; its default is the widget's.

    ``request_input``: the value goes to ``comfy_llm_inputs.prepare_inputs`` under the
    field's name (:func:`request_inputs`), unread by the node.
    """
    metadata = {WIDGET: (build, options), REQUEST_INPUT: request_input}
    return dataclasses.field(default=default, metadata=metadata)


def request_inputs(record: object) -> dict[str, object]:
    """The record's request inputs (``widget(..., request_input=True)``), by field name."""
    return {
        field.name: getattr(record, field.name)
        for field in dataclasses.fields(record)  # type: ignore[arg-type]
        if field.metadata[REQUEST_INPUT]
    }


def schema_inputs(record: type) -> list[io.Input]:
    """The record's widgets, in its field order (saved ``widgets_values`` depend on it)."""
    built = []
    for field in dataclasses.fields(record):
        build, options = field.metadata[WIDGET]
        build = build or SHARED_WIDGETS[field.name]
        built.append(build(field.name, field.default, **options))
    return built


def shared(default: _T, **options: object) -> _T:
    """A field both nodes ask: its widget is the one :data:`SHARED_WIDGETS` names for it.

    The record keeps its own default and widget order; ``options`` go to the
    builder (``seed``'s tooltip, ``response_schema``'s).
    """
    return dataclasses.field(
        default=default, metadata={WIDGET: (None, options), REQUEST_INPUT: False}
    )


class SharedInputs:
    """What both nodes' records read the same way: the model to run, the sampling.

    A base of ``NodeInputs`` and ``CaptionInputs`` (not a dataclass itself:
    each record declares these fields where its widget order puts them).
    """

    model_profile: str
    custom_model: str
    max_new_tokens: int
    enable_reasoning: bool
    temperature: float
    top_p: float
    seed: int
    response_schema: str

    def model(self) -> str:
        """The reference the run uses: ``custom_model`` when typed, else the picked one.

        Raises:
            ValueError: The typed ``custom_model`` cannot be used (``_picker``); the
                nodes ask first, before their status changes.
        """
        return chosen_model(self.model_profile, self.custom_model).strip()

    def settings(self) -> GenerationSettings:
        """The generation settings (checked there: ``GenerationSettingsError``)."""
        return GenerationSettings(
            max_new_tokens=self.max_new_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            seed=self.seed,
            enable_reasoning=self.enable_reasoning,
            response_schema=self.response_schema or None,
        )


def supported(factory: Callable[..., object], **options: object) -> dict[str, object]:
    """``options`` minus the keywords this ComfyUI's ``factory`` does not take.

    ``advanced``, ``control_after_generate`` and ``search_aliases`` are newer
    than some ComfyUI releases people run; the nodes must load on those too.
    """
    try:
        parameters = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return options
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return options
    return {name: value for name, value in options.items() if name in parameters}


def _seed_control() -> object:
    """Seed control "fixed": the seed stays put after a run, so an unchanged graph is cached."""
    control = getattr(io, "ControlAfterGenerate", None)
    return control.fixed if control is not None else True


def prompt_input(name: str, default: str, /, *, tooltip: str, placeholder: str) -> io.Input:
    """The instruction, multiline."""
    string = io.String.Input
    return string(
        name,
        multiline=True,
        default=default,
        tooltip=tooltip,
        **supported(string, placeholder=placeholder),
    )


def model_input(name: str, default: str, /) -> io.Input:
    """``model_profile``: the model picker (``comfy_llm._picker`` says why a COMBO).

    Its list (curated ids, staged snapshots, checkpoint folders under
    models/LLM, models/VLM, models/modal_llm) is read again for every
    ``/object_info``; a saved value not in it still loads and runs, because
    the nodes' ``validate_inputs`` takes ``model_profile`` over from ComfyUI's
    list check.
    """
    choices = model_choices(default)
    labels = {value: label for value, label in choices.items() if label != value}
    return io.Combo.Input(
        name,
        options=list(choices),
        default=default,
        extra_dict={MODEL_LABELS: labels},
        tooltip=(
            "The models this machine can run: reviewed ones, ones already downloaded, and "
            "checkpoint folders from models/LLM or models/VLM (used in place, never copied). "
            "A Hub model downloads into models/modal_llm on its first run and stays pinned. "
            "To use one not listed, type it into custom_model, which overrides this."
        ),
    )


def custom_model_input(name: str, default: str, /) -> io.Input:
    """``custom_model``: a typed reference that wins over the picker (appended last)."""
    return io.String.Input(
        name,
        display_name="custom_model (overrides model_profile)",
        default=default,
        optional=True,
        tooltip=(
            "Overrides model_profile when not empty: a Hugging Face id owner/model"
            "[@revision] (or its model page's address, pasted), a curated id, an absolute "
            "checkpoint folder path, or models/<folder>/<name>. Checked when the node runs. "
            "Add :nf4 or :int8 to a Hub id or curated id to quantize it as it loads "
            "(bitsandbytes, Transformers models on NVIDIA or the CPU: smaller, slower); "
            "add :Q4_K_M or another quantization to pick a GGUF repository's file."
        ),
    )


def system_prompt_input(name: str, default: str, /) -> io.Input:
    string = io.String.Input
    return string(
        name,
        multiline=True,
        default=default,
        optional=True,
        tooltip="Instructions given before the prompt; empty uses the model's own default.",
        **supported(string, advanced=True),
    )


def max_new_tokens_input(name: str, default: int, /) -> io.Input:
    return io.Int.Input(
        name,
        default=default,
        min=1,
        max=MAX_NEW_TOKENS_LIMIT,
        optional=True,
        tooltip="Most tokens the model may generate, reasoning included.",
    )


def enable_reasoning_input(name: str, default: bool, /) -> io.Input:
    return io.Boolean.Input(
        name,
        default=default,
        optional=True,
        tooltip=(
            "Let reasoning models (e.g. Qwen3.5) think first; the thinking goes to the "
            "reasoning output. Models without a reasoning mode ignore it."
        ),
    )


def temperature_input(name: str, default: float, /) -> io.Input:
    number = io.Float.Input
    return number(
        name,
        default=default,
        min=0.0,
        max=2.0,
        step=0.05,
        optional=True,
        tooltip="0 always picks the likeliest token (same answer every run); higher varies.",
        **supported(number, advanced=True),
    )


def top_p_input(name: str, default: float, /) -> io.Input:
    number = io.Float.Input
    return number(
        name,
        default=default,
        min=0.01,
        max=1.0,
        step=0.01,
        optional=True,
        tooltip="Sample only from the likeliest tokens making up this share of probability.",
        **supported(number, advanced=True),
    )


SEED_TOOLTIP = "Sampling seed: the same seed and inputs give the same answer."


def seed_input(name: str, default: int, /, *, tooltip: str = SEED_TOOLTIP) -> io.Input:
    integer = io.Int.Input
    return integer(
        name,
        default=default,
        min=0,
        max=defaults.SEED_MAX,
        optional=True,
        tooltip=tooltip,
        **supported(integer, control_after_generate=_seed_control()),
    )


def keep_model_loaded_input(name: str, default: bool, /) -> io.Input:
    return io.Boolean.Input(
        name,
        default=default,
        optional=True,
        tooltip="Keep the model in memory for the next run (fast repeats); off unloads it.",
    )


def response_schema_input(name: str, default: str, /, *, tooltip: str) -> io.Input:
    string = io.String.Input
    return string(
        name,
        multiline=True,
        default=default,
        optional=True,
        tooltip=tooltip,
        **supported(string, advanced=True),
    )


def run_on_modal_input(name: str, default: bool, /) -> io.Input:
    boolean = io.Boolean.Input
    return boolean(
        name,
        default=default,
        optional=True,
        tooltip=(
            "Run on a Modal cloud GPU instead of this machine (needs the Modal extra: "
            f"`{install_command('modal')}`, and `modal token new` once). The first run "
            "deploys this installation's Modal app."
        ),
        **supported(boolean, advanced=True),
    )


def modal_gpu_input(name: str, default: str, /) -> io.Input:
    combo = io.Combo.Input
    return combo(
        name,
        options=list(MODAL_GPUS),
        default=default,
        optional=True,
        tooltip="The Modal GPU type the model runs on when run_on_modal is on.",
        **supported(combo, advanced=True),
    )


def modal_workers_input(name: str, default: int, /) -> io.Input:
    integer = io.Int.Input
    return integer(
        name,
        default=default,
        min=1,
        max=defaults.MAX_MODAL_WORKERS,
        optional=True,
        tooltip=(
            "With run_on_modal: how many GPU containers caption at once (each serves chunks "
            "of images on its own resident model; N workers, N GPUs billed while busy)."
        ),
        **supported(integer, advanced=True),
    )


def media_input(factory: Callable[..., io.Input], tooltip: str) -> WidgetBuilder:
    """An optional link input (``io.Image.Input``, ...): a socket, no widget value."""

    def build(name: str, default: None, /) -> io.Input:
        return factory(name, optional=True, tooltip=tooltip)

    return build


SHARED_WIDGETS: Final[dict[str, WidgetBuilder]] = {
    "model_profile": model_input,
    "custom_model": custom_model_input,
    "system_prompt": system_prompt_input,
    "max_new_tokens": max_new_tokens_input,
    "enable_reasoning": enable_reasoning_input,
    "temperature": temperature_input,
    "top_p": top_p_input,
    "seed": seed_input,
    "keep_model_loaded": keep_model_loaded_input,
    "response_schema": response_schema_input,
    "run_on_modal": run_on_modal_input,
    "modal_gpu": modal_gpu_input,
}
"""The widget of each input both nodes ask (``shared()`` fields), by field name: one home
for its spelling, range and help text."""
