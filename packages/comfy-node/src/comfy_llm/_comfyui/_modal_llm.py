"""The ``ModalLLM`` V3 node: ComfyUI's face of comfy-llm.

The node id and input names are the seed system's, so workflows saved with it
load unchanged; outputs stay ``response, metadata_json, reasoning`` in that
order (reasoning was appended last to keep saved link indices valid).
Everything ComfyUI-specific that happens at run time lives in ``_comfy_glue``;
the request itself follows the same path as ``comfy-llm run``.
"""

from __future__ import annotations

from typing import Any

from comfy_api.latest import io
from comfy_llm_core import defaults

from comfy_llm._comfyui._inputs import (
    SEARCH_ALIASES,
    custom_model_input,
    enable_reasoning_input,
    max_new_tokens_input,
    modal_gpu_input,
    model_input,
    prompt_input,
    response_schema_input,
    run_on_modal_input,
    seed_input,
    supported,
    system_prompt_input,
    temperature_input,
    top_p_input,
)
from comfy_llm._picker import chosen_model, validate_model_inputs

__all__ = ["NODE_ID", "ModalLLMNode", "answer_ui"]

NODE_ID = "ModalLLM"


def _inputs() -> list[Any]:
    """The inputs, in the seed node's order (saved ``widgets_values`` depend on it)."""
    integer, number = io.Int.Input, io.Float.Input
    boolean = io.Boolean.Input
    return [
        prompt_input(
            default="Describe the image.",
            tooltip="What to ask the model about the connected images, video and files.",
            placeholder="Ask about the images, video or files…",
        ),
        model_input(),
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
        system_prompt_input(),
        max_new_tokens_input(),
        enable_reasoning_input(),
        temperature_input(),
        top_p_input(),
        seed_input(),
        integer(
            "video_frames",
            default=defaults.VIDEO_FRAMES,
            min=1,
            max=defaults.MAX_VIDEO_FRAMES,
            optional=True,
            tooltip=(
                "Frames sampled evenly over the video (or its trim); a model may accept fewer."
            ),
        ),
        number(
            "reserve_free_vram_gb",
            default=defaults.RESERVE_GB["modal"],
            min=0.0,
            max=defaults.MAX_RESERVE_GB,
            optional=True,
            tooltip=(
                "With run_on_modal: GiB of the Modal GPU's memory kept free for the image and "
                "video nodes that run there after the model loads. Local runs use "
                "local_reserve_free_memory_gb."
            ),
            **supported(number, advanced=True),
        ),
        boolean(
            "keep_model_loaded",
            default=True,
            optional=True,
            tooltip="Keep the model in memory for the next run (fast repeats); off unloads it.",
        ),
        number(
            "local_reserve_free_memory_gb",
            default=defaults.RESERVE_GB["local_cpu"],
            min=0.0,
            max=defaults.MAX_RESERVE_GB,
            optional=True,
            tooltip=(
                "Runs on this machine: GiB kept free for other nodes when the model loads, in "
                "the memory it loads into (an NVIDIA GPU's memory, Apple Silicon's unified "
                "memory, or RAM on CPU). Modal runs use reserve_free_vram_gb."
            ),
            **supported(number, advanced=True),
        ),
        run_on_modal_input(),
        modal_gpu_input(),
        # New inputs go last: saved workflows keep their widget order.
        response_schema_input(
            tooltip=(
                "Optional JSON Schema: the answer is constrained to JSON that satisfies "
                "it and validated; an answer that still fails after one retry stops the run "
                "with the reason. Empty = free text."
            )
        ),
        custom_model_input(),
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
            **supported(
                io.Schema,
                # no essentials_category: the 1.58.1 frontend files a node that has one
                # under "Comfy" (nodeSource "essentials"), away from the caption node
                # and the search box's "Extensions" filter (nodeDefStore getNodeSource)
                search_aliases=SEARCH_ALIASES,
                # The answer is also UI output (below); this flag makes ComfyUI send it
                # again when a later run takes the node from its cache
                # (comfy_api/latest/_io.py Schema, execution.py _is_intermediate_output).
                has_intermediate_output=True,
            ),
        )

    @classmethod
    def validate_inputs(cls, model_profile: str) -> bool | str:
        """Refuse at queue time a model reference that cannot parse (any other passes).

        Naming ``model_profile`` here takes it off ComfyUI's list check, so saved
        workflows with a model not in the list run (``comfy_llm._picker``).
        """
        return validate_model_inputs(model_profile)

    @classmethod
    def execute(cls, prompt: str, model_profile: str, **optional: Any) -> io.NodeOutput:
        """Run one request; returns response, metadata_json and reasoning."""
        from comfy_llm._comfyui._run import hidden_node_id, run_node

        model = chosen_model(model_profile, optional.pop("custom_model", None))
        response, metadata_json, reasoning = run_node(
            prompt=prompt, model_profile=model, node_id=hidden_node_id(cls), **optional
        )
        return io.NodeOutput(
            response, metadata_json, reasoning, ui=answer_ui(response, reasoning, metadata_json)
        )


def answer_ui(response: str, reasoning: str, metadata_json: str) -> dict[str, list[str]]:
    """What the node shows once it ran: the answer, its reasoning, why it is empty.

    ``text`` has the shape of ``ui.PreviewText(response).as_dict()``
    (comfy_api/latest/_ui.py); ``reasoning`` and ``note`` are for the node's
    frontend extension (``web/comfy-llm.js``), which folds the reasoning away.
    ComfyUI keeps UI output in the prompt's history, from which the extension
    shows the answer again after a browser reload. Plain lists of strings, so
    ComfyUI releases without ``ui.PreviewText`` take it too.
    """
    import json

    ui = {"text": [response]}
    if reasoning:
        ui["reasoning"] = [reasoning]
    note = (json.loads(metadata_json).get("empty_answer") or {}).get("message")
    if note:
        ui["note"] = [str(note)]
    return ui
