"""The widgets both nodes share, defined once: name, range, tooltip, default model.

``ModalLLM`` and ``ComfyLLMCaption`` ask the same things (prompt, model,
system prompt, sampling, seed, residency, schema). Each widget is built here
so the two nodes cannot drift apart in spelling, ranges or help text; a node
passes only what differs for its job (a caption's smaller token budget, greedy
decoding). The order a node lists them in stays the node's own business:
saved ``widgets_values`` are positional.
"""

from __future__ import annotations

import inspect
from typing import Any

from comfy_api.latest import io
from comfy_llm_core import defaults, install_command

__all__ = [
    "DEFAULT_MODEL",
    "MODAL_GPUS",
    "MODEL_LABELS",
    "SEARCH_ALIASES",
    "enable_reasoning_input",
    "keep_model_loaded_input",
    "custom_model_input",
    "max_new_tokens_input",
    "modal_gpu_input",
    "modal_workers_input",
    "model_input",
    "prompt_input",
    "response_schema_input",
    "run_on_modal_input",
    "seed_input",
    "supported",
    "system_prompt_input",
    "temperature_input",
    "top_p_input",
]

DEFAULT_MODEL = "smolvlm-256m-instruct"
"""The model a new node starts with: the curated SmolVLM 256M (commit-pinned, reviewed for
every target, small enough for any machine). Saved workflows keep their own value."""
MODEL_LABELS = "comfy_llm_labels"
"""The picker's input-spec key holding ``{value: label}``, read by ``web/comfy-llm.js``."""

SEARCH_ALIASES = ["LLM", "VLM", "caption", "describe", "vision", "multimodal", "chat"]
MAX_NEW_TOKENS_LIMIT = 32768
MODAL_GPUS = ("L4", "L40S", "A100-40GB", "A100-80GB", "H100", "H200", "B200", "RTX-PRO-6000")


def supported(factory: Any, **options: Any) -> dict[str, Any]:
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


def _seed_control() -> Any:
    """Seed control "fixed": the seed stays put after a run, so an unchanged graph is cached."""
    control = getattr(io, "ControlAfterGenerate", None)
    return control.fixed if control is not None else True


def prompt_input(*, default: str, tooltip: str, placeholder: str) -> Any:
    """The instruction, multiline."""
    string = io.String.Input
    return string(
        "prompt",
        multiline=True,
        default=default,
        tooltip=tooltip,
        **supported(string, placeholder=placeholder),
    )


def model_input() -> Any:
    """``model_profile``: the model picker (``comfy_llm._picker`` says why a COMBO).

    Its list (curated ids, staged snapshots, checkpoint folders under
    models/LLM, models/VLM, models/modal_llm) is read again for every
    ``/object_info``; a saved value not in it still loads and runs, because
    the nodes' ``validate_inputs`` takes ``model_profile`` over from ComfyUI's
    list check.
    """
    from comfy_llm._picker import model_choices

    choices = model_choices(DEFAULT_MODEL)
    labels = {value: label for value, label in choices.items() if label != value}
    return io.Combo.Input(
        "model_profile",
        options=list(choices),
        default=DEFAULT_MODEL,
        extra_dict={MODEL_LABELS: labels},
        tooltip=(
            "The models this machine can run: reviewed ones, ones already downloaded, and "
            "checkpoint folders from models/LLM or models/VLM (used in place, never copied). "
            "A Hub model downloads into models/modal_llm on its first run and stays pinned. "
            "To use one not listed, type it into custom_model, which overrides this."
        ),
    )


def custom_model_input() -> Any:
    """``custom_model``: a typed reference that wins over the picker (appended last)."""
    return io.String.Input(
        "custom_model",
        display_name="custom_model (overrides model_profile)",
        default="",
        optional=True,
        tooltip=(
            "Overrides model_profile when not empty: a Hugging Face id owner/model"
            "[@revision] (or its model page's address, pasted), a curated id, an absolute "
            "checkpoint folder path, or models/<folder>/<name>. Checked when the node runs."
        ),
    )


def system_prompt_input() -> Any:
    string = io.String.Input
    return string(
        "system_prompt",
        multiline=True,
        default="",
        optional=True,
        tooltip="Instructions given before the prompt; empty uses the model's own default.",
        **supported(string, advanced=True),
    )


def max_new_tokens_input(*, default: int = defaults.MAX_NEW_TOKENS) -> Any:
    return io.Int.Input(
        "max_new_tokens",
        default=default,
        min=1,
        max=MAX_NEW_TOKENS_LIMIT,
        optional=True,
        tooltip="Most tokens the model may generate, reasoning included.",
    )


def enable_reasoning_input(*, default: bool = True) -> Any:
    return io.Boolean.Input(
        "enable_reasoning",
        default=default,
        optional=True,
        tooltip=(
            "Let reasoning models (e.g. Qwen3.5) think first; the thinking goes to the "
            "reasoning output. Models without a reasoning mode ignore it."
        ),
    )


def temperature_input(*, default: float = defaults.TEMPERATURE) -> Any:
    number = io.Float.Input
    return number(
        "temperature",
        default=default,
        min=0.0,
        max=2.0,
        step=0.05,
        optional=True,
        tooltip="0 always picks the likeliest token (same answer every run); higher varies.",
        **supported(number, advanced=True),
    )


def top_p_input() -> Any:
    number = io.Float.Input
    return number(
        "top_p",
        default=defaults.TOP_P,
        min=0.01,
        max=1.0,
        step=0.01,
        optional=True,
        tooltip="Sample only from the likeliest tokens making up this share of probability.",
        **supported(number, advanced=True),
    )


_SEED_TOOLTIP = "Sampling seed: the same seed and inputs give the same answer."


def seed_input(*, tooltip: str = _SEED_TOOLTIP) -> Any:
    integer = io.Int.Input
    return integer(
        "seed",
        default=0,
        min=0,
        max=defaults.SEED_MAX,
        optional=True,
        tooltip=tooltip,
        **supported(integer, control_after_generate=_seed_control()),
    )


def keep_model_loaded_input() -> Any:
    return io.Boolean.Input(
        "keep_model_loaded",
        default=True,
        optional=True,
        tooltip="Keep the model in memory for the next run (fast repeats); off unloads it.",
    )


def response_schema_input(*, tooltip: str) -> Any:
    string = io.String.Input
    return string(
        "response_schema",
        multiline=True,
        default="",
        optional=True,
        tooltip=tooltip,
        **supported(string, advanced=True),
    )


def run_on_modal_input() -> Any:
    boolean = io.Boolean.Input
    return boolean(
        "run_on_modal",
        default=False,
        optional=True,
        tooltip=(
            "Run on a Modal cloud GPU instead of this machine (needs the Modal extra: "
            f"`{install_command('modal')}`, and `modal token new` once). The first run "
            "deploys this installation's Modal app."
        ),
        **supported(boolean, advanced=True),
    )


def modal_gpu_input() -> Any:
    combo = io.Combo.Input
    return combo(
        "modal_gpu",
        options=list(MODAL_GPUS),
        default="L40S",
        optional=True,
        tooltip="The Modal GPU type the model runs on when run_on_modal is on.",
        **supported(combo, advanced=True),
    )


def modal_workers_input() -> Any:
    integer = io.Int.Input
    return integer(
        "modal_workers",
        default=1,
        min=1,
        max=defaults.MAX_MODAL_WORKERS,
        optional=True,
        tooltip=(
            "With run_on_modal: how many GPU containers caption at once (each serves chunks "
            "of images on its own resident model; N workers, N GPUs billed while busy)."
        ),
        **supported(integer, advanced=True),
    )
