"""The ``ModalLLM`` V3 node: ComfyUI's face of comfy-llm.

The node id and input names are the seed system's, so workflows saved with it
load unchanged; outputs stay ``response, metadata_json, reasoning`` in that
order (reasoning was appended last to keep saved link indices valid).
Everything ComfyUI-specific that happens at run time lives in ``_comfy_glue``;
the request itself follows the same path as ``comfy-llm run``.
"""

from __future__ import annotations

import inspect
from typing import Any

from comfy_api.latest import ComfyExtension, io
from comfy_llm_core import defaults

__all__ = ["NODE_ID", "ComfyLLMExtension", "ModalLLMNode", "build_extension"]

NODE_ID = "ModalLLM"
MODAL_GPUS = ("L4", "L40S", "A100-40GB", "A100-80GB", "H100", "H200", "B200", "RTX-PRO-6000")
_DEFAULT_MODEL = "HuggingFaceTB/SmolVLM-256M-Instruct"


_SEARCH_ALIASES = ["LLM", "VLM", "caption", "describe", "vision", "multimodal", "chat"]


def _supported(factory: Any, **options: Any) -> dict[str, Any]:
    """``options`` minus the keywords this ComfyUI's ``factory`` does not take.

    ``advanced``, ``control_after_generate`` and ``search_aliases`` are newer
    than some ComfyUI releases people run; the node must load on those too.
    """
    try:
        parameters = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return options
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return options
    return {name: value for name, value in options.items() if name in parameters}


def _seed_control() -> Any:
    control = getattr(io, "ControlAfterGenerate", None)
    return control.fixed if control is not None else True


def _inputs() -> list[Any]:
    """The inputs, in the seed node's order (saved ``widgets_values`` depend on it)."""
    string, integer, number = io.String.Input, io.Int.Input, io.Float.Input
    boolean, combo = io.Boolean.Input, io.Combo.Input
    return [
        string(
            "prompt",
            multiline=True,
            default="Describe the image.",
            tooltip="What to ask the model about the connected images, video and files.",
            **_supported(string, placeholder="Ask about the images, video or files…"),
        ),
        string(
            "model_profile",
            default=_DEFAULT_MODEL,
            tooltip=(
                "A curated profile id or a Hugging Face id owner/model[@revision]; the first "
                "run downloads it into models/modal_llm and pins the revision."
            ),
        ),
        io.Image.Input(
            "images", optional=True, tooltip="Optional IMAGE (a batch is several images)."
        ),
        io.Video.Input(
            "video",
            optional=True,
            tooltip=(
                "Optional VIDEO (Load Video; a Video Slice trim is honoured). video_frames "
                "frames are sampled evenly, with their timestamps."
            ),
        ),
        io.Custom("OPENAI_INPUT_FILES").Input(
            "files",
            optional=True,
            tooltip=(
                "Optional text or PDF files from 'OpenAI ChatGPT Input Files' nodes; their "
                "text is added to the prompt (nothing is sent to OpenAI)."
            ),
        ),
        string(
            "system_prompt",
            multiline=True,
            default="",
            optional=True,
            tooltip="Instructions given before the prompt; empty uses the model's own default.",
            **_supported(string, advanced=True),
        ),
        integer(
            "max_new_tokens",
            default=defaults.MAX_NEW_TOKENS,
            min=1,
            max=32768,
            optional=True,
            tooltip="Most tokens the model may generate, reasoning included.",
        ),
        boolean(
            "enable_reasoning",
            default=True,
            optional=True,
            tooltip=(
                "Let reasoning models (e.g. Qwen3.5) think first; the thinking goes to the "
                "reasoning output. Models without a reasoning mode ignore it."
            ),
        ),
        number(
            "temperature",
            default=defaults.TEMPERATURE,
            min=0.0,
            max=2.0,
            step=0.05,
            optional=True,
            tooltip="0 always picks the likeliest token (same answer every run); higher varies.",
            **_supported(number, advanced=True),
        ),
        number(
            "top_p",
            default=defaults.TOP_P,
            min=0.01,
            max=1.0,
            step=0.01,
            optional=True,
            tooltip="Sample only from the likeliest tokens making up this share of probability.",
            **_supported(number, advanced=True),
        ),
        integer(
            "seed",
            default=0,
            min=0,
            max=defaults.SEED_MAX,
            optional=True,
            tooltip="Sampling seed: the same seed and inputs give the same answer.",
            **_supported(integer, control_after_generate=_seed_control()),
        ),
        integer(
            "video_frames",
            default=defaults.VIDEO_FRAMES,
            min=1,
            max=256,
            optional=True,
            tooltip="Frames sampled evenly over the video (or its trim).",
        ),
        number(
            "reserve_free_vram_gb",
            default=defaults.RESERVE_GB["local_cuda"],
            min=0.0,
            max=512.0,
            optional=True,
            tooltip=(
                "NVIDIA GPUs only: GB of GPU memory to keep free for other nodes when the model "
                "loads. Apple Silicon and CPU use local_reserve_free_memory_gb."
            ),
            **_supported(number, advanced=True),
        ),
        boolean(
            "keep_model_loaded",
            default=True,
            optional=True,
            tooltip="Keep the model in memory for the next run (fast repeats); off unloads it.",
        ),
        number(
            "local_reserve_free_memory_gb",
            default=defaults.RESERVE_GB["local_apple"],
            min=0.0,
            max=512.0,
            optional=True,
            tooltip=(
                "Apple Silicon and CPU only: GB of system memory to keep free when the model "
                "loads. NVIDIA GPUs use reserve_free_vram_gb."
            ),
            **_supported(number, advanced=True),
        ),
        boolean(
            "run_on_modal",
            default=False,
            optional=True,
            tooltip=(
                "Run on a Modal cloud GPU instead of this machine (needs "
                'pip install "comfy-llm[modal]" and `modal token new` once). The first run '
                "deploys this installation's Modal app."
            ),
            **_supported(boolean, advanced=True),
        ),
        combo(
            "modal_gpu",
            options=list(MODAL_GPUS),
            default="L40S",
            optional=True,
            tooltip="The Modal GPU type the model runs on when run_on_modal is on.",
            **_supported(combo, advanced=True),
        ),
        # New inputs go last: saved workflows keep their widget order.
        string(
            "response_schema",
            multiline=True,
            default="",
            optional=True,
            tooltip=(
                "Optional JSON Schema: the answer is constrained to JSON that satisfies "
                "it and validated (one retry). Empty = free text."
            ),
            **_supported(string, advanced=True),
        ),
    ]


def _outputs() -> list[Any]:
    return [
        io.String.Output(
            "response",
            display_name="response",
            tooltip="The model's answer, without its reasoning.",
        ),
        io.String.Output(
            "metadata_json",
            display_name="metadata_json",
            tooltip=(
                "Indented JSON about the run: model and pinned revision, target and backend, "
                "tokens, timings, memory, cache status."
            ),
        ),
        io.String.Output(
            "reasoning",
            display_name="reasoning",
            tooltip="The model's thinking, when it has a reasoning mode that is on; else empty.",
        ),
    ]


class ModalLLMNode(io.ComfyNode):
    """Answer a prompt about images, video and files with a multimodal LLM."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        """Declare inputs and outputs (names kept from the seed node)."""
        return io.Schema(
            node_id=NODE_ID,
            display_name="Multimodal LLM (comfy-llm)",
            category="comfy-llm",
            description=(
                "Answers a prompt about images, video and text/PDF files with a Hugging Face "
                "vision-language model, in this ComfyUI process (MLX-VLM on Apple Silicon, "
                "Transformers on NVIDIA or CPU)."
            ),
            inputs=_inputs(),
            outputs=_outputs(),
            hidden=[io.Hidden.unique_id],
            not_idempotent=True,
            **_supported(
                io.Schema, search_aliases=_SEARCH_ALIASES, essentials_category="Text Generation"
            ),
        )

    @classmethod
    def execute(cls, prompt: str, model_profile: str, **optional: Any) -> io.NodeOutput:
        """Run one request; returns response, metadata_json and reasoning."""
        from comfy_llm._node_run import run_node

        node_id = getattr(cls.hidden, "unique_id", None) if cls.hidden is not None else None
        response, metadata_json, reasoning = run_node(
            prompt=prompt, model_profile=model_profile, node_id=node_id, **optional
        )
        return io.NodeOutput(response, metadata_json, reasoning)


class ComfyLLMExtension(ComfyExtension):
    """The extension ComfyUI loads through ``comfy_entrypoint``."""

    async def get_node_list(self) -> list[type[io.ComfyNode]]:
        """List the nodes this package provides."""
        from comfy_llm._caption_node import CaptionImagesNode

        return [ModalLLMNode, CaptionImagesNode]


def build_extension() -> ComfyLLMExtension:
    """Create the extension object returned by ``comfy_entrypoint``."""
    return ComfyLLMExtension()
