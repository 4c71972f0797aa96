"""``NodeInputs``: the ``ModalLLM`` node's inputs, one typed record for schema and run.

Each field is a widget (``_inputs.widget``): its name, default and order are
the node's schema, and ComfyUI's keyword values build the record the run
takes. The order is the seed node's, new inputs appended last: saved
``widgets_values`` are positional, so a workflow saved with any older
release loads with the same values.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from comfy_api.latest import io
from comfy_llm_core import ExecutionTarget, defaults

from comfy_llm._comfyui._inputs import (
    DEFAULT_MODEL,
    SharedInputs,
    media_input,
    prompt_input,
    request_inputs,
    shared,
    supported,
    widget,
)
from comfy_llm._pipeline import LLMRequest

__all__ = ["NodeInputs", "reserve_for"]


def _video_frames_input(name: str, default: int, /) -> io.Input:
    return io.Int.Input(
        name,
        default=default,
        min=1,
        max=defaults.MAX_VIDEO_FRAMES,
        optional=True,
        tooltip="Frames sampled evenly over the video (or its trim); a model may accept fewer.",
    )


def _reserve_input(name: str, default: float, /, *, tooltip: str) -> io.Input:
    number = io.Float.Input
    return number(
        name,
        default=default,
        min=0.0,
        max=defaults.MAX_RESERVE_GB,
        optional=True,
        tooltip=tooltip,
        **supported(number, advanced=True),
    )


_MODAL_RESERVE_TIP = (
    "With run_on_modal: GiB of the Modal GPU's memory kept free for the image and "
    "video nodes that run there after the model loads. Local runs use "
    "local_reserve_free_memory_gb."
)
_LOCAL_RESERVE_TIP = (
    "Runs on this machine: GiB kept free for other nodes when the model loads, in "
    "the memory it loads into (an NVIDIA GPU's memory, Apple Silicon's unified "
    "memory, or RAM on CPU). Modal runs use reserve_free_vram_gb."
)
_SCHEMA_TIP = (
    "Optional JSON Schema: the answer is constrained to JSON that satisfies "
    "it and validated; an answer that still fails after one retry stops the run "
    "with the reason. Empty = free text."
)
_VIDEO_TIP = (
    "Optional VIDEO (Load Video; a Video Slice trim is honoured). video_frames "
    "frames are sampled evenly, with their timestamps."
)
_FILES_TIP = (
    "Optional text or PDF files from 'OpenAI ChatGPT Input Files' nodes; their "
    "text is added to the prompt (nothing is sent to OpenAI)."
)


@dataclasses.dataclass(frozen=True)
class NodeInputs(SharedInputs):
    """One ``ModalLLM`` execution's inputs, in the node's widget order.

    ``images``, ``video`` and ``files`` are ComfyUI's IMAGE, VIDEO and
    OPENAI_INPUT_FILES values; they and ``video_frames`` are the request's
    inputs (``request_input=True``), handed to ``comfy_llm_inputs`` unread
    under their field names (it checks them where they enter).
    """

    prompt: str = widget(
        "Describe the image.",
        prompt_input,
        tooltip="What to ask the model about the connected images, video and files.",
        placeholder="Ask about the images, video or files…",
    )
    model_profile: str = shared(DEFAULT_MODEL)
    images: object = widget(
        None,
        media_input(io.Image.Input, "Optional IMAGE (a batch is several images)."),
        request_input=True,
    )
    video: object = widget(None, media_input(io.Video.Input, _VIDEO_TIP), request_input=True)
    files: object = widget(
        None, media_input(io.Custom("OPENAI_INPUT_FILES").Input, _FILES_TIP), request_input=True
    )
    system_prompt: str = shared("")
    max_new_tokens: int = shared(defaults.MAX_NEW_TOKENS)
    enable_reasoning: bool = shared(True)
    temperature: float = shared(defaults.TEMPERATURE)
    top_p: float = shared(defaults.TOP_P)
    seed: int = shared(0)
    video_frames: int = widget(defaults.VIDEO_FRAMES, _video_frames_input, request_input=True)
    reserve_free_vram_gb: float = widget(
        defaults.RESERVE_GB["modal"], _reserve_input, tooltip=_MODAL_RESERVE_TIP
    )
    keep_model_loaded: bool = shared(True)
    local_reserve_free_memory_gb: float = widget(
        defaults.RESERVE_GB["local_cpu"], _reserve_input, tooltip=_LOCAL_RESERVE_TIP
    )
    run_on_modal: bool = shared(False)
    modal_gpu: str = shared(defaults.DEFAULT_GPU)
    # New inputs go last: saved workflows keep their widget order.
    response_schema: str = shared("", tooltip=_SCHEMA_TIP)
    custom_model: str = shared("")

    def request(self, target: ExecutionTarget, root: Path) -> LLMRequest:
        """The pipeline request these inputs make on ``target``, storing under ``root``.

        Raises:
            ValueError: A typed ``custom_model`` cannot be used (``SharedInputs.model``).
        """
        return LLMRequest(
            model=self.model(),
            prompt=self.prompt,
            system_prompt=self.system_prompt or None,
            inputs=request_inputs(self),
            settings=self.settings(),
            target=target.value,
            run_on_modal=self.run_on_modal,
            modal_gpu=self.modal_gpu,
            storage_root=root,
            reserve_gb=reserve_for(
                run_on_modal=self.run_on_modal,
                reserve_free_vram_gb=self.reserve_free_vram_gb,
                local_reserve_free_memory_gb=self.local_reserve_free_memory_gb,
            ),
            keep_loaded=self.keep_model_loaded,
        )


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
