"""The ``ComfyLLMCaption`` node: one caption per image, caption files for LoRA datasets.

Shares the request path and the resident manager with ``ModalLLM``: the
model loads once for the whole batch. Outputs a ComfyUI output list of
captions (one per image, in order) and one metadata JSON. With
``run_on_modal`` the images go to ``modal_workers`` GPU containers on Modal
(``comfy_llm._caption_modal``), with the same file rules.
"""

from __future__ import annotations

from typing import Any

from comfy_api.latest import io
from comfy_llm_core import defaults

from comfy_llm._comfyui._caption_inputs import convention_inputs, conventions_from
from comfy_llm._comfyui._inputs import (
    SEARCH_ALIASES,
    custom_model_input,
    enable_reasoning_input,
    keep_model_loaded_input,
    max_new_tokens_input,
    modal_gpu_input,
    modal_workers_input,
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

__all__ = [
    "CAPTION_NODE_ID",
    "CaptionImagesNode",
    "caption_summary",
    "conventions_from",
    "input_folder",
]

CAPTION_NODE_ID = "ComfyLLMCaption"
_DEFAULT_PROMPT = "Describe this image in one detailed sentence, as a caption for training."
CAPTION_MAX_NEW_TOKENS = 128
CAPTION_TEMPERATURE = 0.0


def _inputs() -> list[Any]:
    """The shared widgets in ModalLLM's order, then the caption-only ones.

    The shared ones come from ``_inputs`` (one definition for both nodes);
    only the caption defaults differ: a short budget, greedy decoding, no
    thinking.
    """
    boolean, string = io.Boolean.Input, io.String.Input
    return [
        prompt_input(
            default=_DEFAULT_PROMPT,
            tooltip="The instruction given with every image.",
            placeholder="How to caption each image…",
        ),
        model_input(),
        io.Image.Input("images", optional=True, tooltip="An IMAGE batch to caption."),
        string(
            "folder",
            default="",
            optional=True,
            tooltip="A folder of images (png, jpg, webp, ...) and videos to caption, sorted "
            "by name: a full path, or a folder name inside ComfyUI's input folder.",
        ),
        system_prompt_input(),
        max_new_tokens_input(default=CAPTION_MAX_NEW_TOKENS),
        enable_reasoning_input(default=False),
        temperature_input(default=CAPTION_TEMPERATURE),
        top_p_input(),
        seed_input(tooltip="Sampling seed, the same for every image."),
        keep_model_loaded_input(),
        response_schema_input(
            tooltip=(
                "A JSON Schema every caption must satisfy (constrained decoding); an image "
                "whose answer still fails after one retry counts as failed, with the reason."
            )
        ),
        string(
            "caption_prefix",
            default="",
            optional=True,
            tooltip=(
                "Text put before every caption, e.g. a LoRA trigger word; one separator "
                "joins it (a trailing comma is not doubled). {name}, {folder} and "
                "[trigger] are filled in."
            ),
        ),
        boolean(
            "write_caption_files",
            default=True,
            optional=True,
            tooltip="Write a caption file next to each image or video from the folder "
            "(atomically), <name> plus caption_extension.",
        ),
        boolean(
            "skip_existing",
            default=True,
            optional=True,
            tooltip="Keep captions already on disk and do not caption those images "
            "(caption_mode other than skip_existing decides instead).",
        ),
        boolean(
            "overwrite_captions",
            default=False,
            optional=True,
            tooltip="Replace existing caption files (only with skip_existing off; "
            "caption_mode other than skip_existing decides instead).",
        ),
        io.Int.Input(
            "batch_size",
            default=defaults.CAPTION_BATCH_SIZE,
            min=1,
            max=defaults.MAX_CAPTION_BATCH_SIZE,
            optional=True,
            tooltip=(
                "Images the engine captions at once (vLLM always; Transformers and MLX-VLM "
                "with temperature 0). Captions are written as each batch ends."
            ),
            **supported(io.Int.Input, advanced=True),
        ),
        # New inputs go last: saved workflows keep their widget order.
        run_on_modal_input(),
        modal_gpu_input(),
        modal_workers_input(),
        custom_model_input(),
        *convention_inputs(),
    ]


def input_folder(folder: str) -> str:
    """A relative folder names one inside ComfyUI's input folder when that one exists.

    As ComfyUI's own dataset loaders take a folder of ``input/``; a shipped
    template names its sample folder that way. Otherwise the value is used
    as given.
    """
    from pathlib import Path

    from comfy_llm._storage import comfy_input_dir

    if not folder or Path(folder).expanduser().is_absolute():
        return folder
    base = comfy_input_dir()
    if base is not None and (base / folder).is_dir():
        return str(base / folder)
    return folder


class CaptionImagesNode(io.ComfyNode):
    """Caption an IMAGE batch and/or a folder of images with a vision-language model."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        """Declare inputs and outputs."""
        return io.Schema(
            node_id=CAPTION_NODE_ID,
            display_name="Caption images (comfy-llm)",
            category="comfy-llm",
            description=(
                "Captions every image of a batch, or every image and video of a folder, under "
                "one resident model; writes <name>.txt next to each file (LoRA training "
                "datasets), with prefix, suffix, trigger word, modes and a JSONL manifest."
            ),
            inputs=_inputs(),
            outputs=[
                io.String.Output(
                    "captions",
                    display_name="captions",
                    is_output_list=True,
                    tooltip="One caption per image, in input order (prefix included).",
                ),
                io.String.Output(
                    "metadata_json",
                    display_name="metadata_json",
                    tooltip=(
                        "Indented JSON about the batch: counts (captioned, kept, failed, "
                        "written), per-image status and timings, model and backend."
                    ),
                ),
            ],
            hidden=[io.Hidden.unique_id],
            is_output_node=True,  # writing caption files is its job: it runs on its own
            not_idempotent=True,
            **supported(io.Schema, search_aliases=[*SEARCH_ALIASES, "LoRA", "dataset"]),
        )

    @classmethod
    def validate_inputs(cls, model_profile: str) -> bool | str:
        """Refuse at queue time a model reference that cannot parse (see ``_picker``)."""
        return validate_model_inputs(model_profile)

    @classmethod
    def execute(cls, model_profile: str, prompt: str, **optional: Any) -> io.NodeOutput:
        """Caption the batch; returns the captions (a list) and metadata_json.

        Errors reach ComfyUI as ``comfy_llm._comfyui._run.for_comfyui`` has
        them (a comfy-llm error as a plain builtin; tokens scrubbed).
        """
        from comfy_llm._comfyui._run import comfyui_errors

        model = chosen_model(model_profile, optional.pop("custom_model", None))
        return comfyui_errors(cls._execute)(model, prompt, **optional)

    @classmethod
    def _execute(cls, model_profile: str, prompt: str, **optional: Any) -> io.NodeOutput:
        from comfy_llm._comfyui._run import hidden_node_id, node_status

        reasoning = optional.get("enable_reasoning", False)
        with node_status(hidden_node_id(cls), reasoning_enabled=reasoning) as glue:
            return cls._caption(glue, model_profile, prompt, **optional)

    @classmethod
    def _caption(cls, glue: Any, model_profile: str, prompt: str, **optional: Any) -> io.NodeOutput:
        from comfy_llm_residency.backend import GenerationSettings

        from comfy_llm._caption import CaptionJob, caption_items, run_captions
        from comfy_llm._caption_conventions import write_batch_manifest
        from comfy_llm._caption_presets import preset_prompt
        from comfy_llm._comfyui._glue import executing_prompt_id
        from comfy_llm._comfyui._host_memory import host_bridge
        from comfy_llm._comfyui._run import metadata_json
        from comfy_llm._storage import register_model_folder, storage_root
        from comfy_llm._targets import detect_target

        root = storage_root()
        register_model_folder(root)
        settings = GenerationSettings(
            max_new_tokens=optional.get("max_new_tokens", CAPTION_MAX_NEW_TOKENS),
            temperature=optional.get("temperature", CAPTION_TEMPERATURE),
            top_p=optional.get("top_p", defaults.TOP_P),
            seed=optional.get("seed", 0),
            enable_reasoning=optional.get("enable_reasoning", False),
            response_schema=optional.get("response_schema") or None,
        )
        conventions = conventions_from(optional)
        folder = input_folder((optional.get("folder") or "").strip())
        items = caption_items(optional.get("images"), folder, conventions)
        job = CaptionJob(
            model=model_profile.strip(),
            prompt=preset_prompt(optional.get("prompt_preset", "custom"), prompt),
            system_prompt=optional.get("system_prompt") or None,
            settings=settings,
            prefix=optional.get("caption_prefix", ""),
            write_files=optional.get("write_caption_files", True),
            skip_existing=optional.get("skip_existing", True),
            overwrite=optional.get("overwrite_captions", False),
            storage_root=root,
            keep_loaded=optional.get("keep_model_loaded", True),
            batch_size=optional.get("batch_size", defaults.CAPTION_BATCH_SIZE),
            conventions=conventions,
        )
        if optional.get("run_on_modal", False):
            from comfy_llm._caption_modal import ModalCaptionOptions, run_captions_on_modal

            options = ModalCaptionOptions(
                gpu=optional.get("modal_gpu", "L40S"), workers=optional.get("modal_workers", 1)
            )
            batch = run_captions_on_modal(
                job,
                items,
                options,
                progress=glue.progress,
                check_interrupt=glue.check_interrupt,
                prompt_id=executing_prompt_id(),
            )
        else:
            batch = run_captions(
                job,
                items,
                progress=glue.progress,
                on_token=glue.on_token,
                free_host_memory=glue.free_memory,
                prompt_id=executing_prompt_id(),
                host_listener=host_bridge(detect_target(job.target)),
            )
        write_batch_manifest(conventions, folder, items, batch.captions, batch.metadata)
        summary = caption_summary(batch.captions, batch.metadata)
        glue.complete(summary)
        metadata = metadata_json(batch.metadata)
        return io.NodeOutput(batch.captions, metadata, ui={"text": [summary]})


SUMMARY_CAPTIONS = 3
"""Captions shown on the node after a batch (the rest are in the outputs)."""


def caption_summary(captions: list[str], metadata: dict[str, Any]) -> str:
    """What the node shows when a batch ends: counts, where files went, a few captions.

    Captions over CLIP's 75 tokens are named right after the counts
    (``_caption_clip``): the run succeeded, but a trainer would cut them.
    """
    from comfy_llm._caption_clip import clip_warnings

    written = metadata["written"]
    counts = (
        f"Captioned {metadata['captioned']} of {metadata['images']}, "
        f"kept {metadata['kept_existing']}, failed {metadata['failed']}; "
        f"wrote {written} caption file{'' if written == 1 else 's'}"
        + "".join(f" and {metadata[key]}" for key in ("manifest", "csv") if metadata.get(key))
        + "."
    )
    lines = [counts]
    cleaned = [f"{rule} {n}" for rule, n in (metadata.get("cleanup") or {}).items() if n]
    if cleaned:
        lines.append(f"Cleaned (images per rule): {', '.join(cleaned)}.")
    long = clip_warnings(metadata)
    for warning in long[:SUMMARY_CAPTIONS]:
        lines.append(f"Warning: {warning}")
    if len(long) > SUMMARY_CAPTIONS:
        lines.append(f"… and {len(long) - SUMMARY_CAPTIONS} more over CLIP's 75 tokens.")
    failed = [r for r in metadata.get("per_image", []) if r.get("status") == "failed"]
    for record in failed[:SUMMARY_CAPTIONS]:
        lines.append(f"Failed: {record['name']}: {record.get('error', '')}"[:200])
    shown = [
        (record["name"], caption)
        for record, caption in zip(metadata.get("per_image", []), captions, strict=False)
        if caption
    ]
    for name, caption in shown[:SUMMARY_CAPTIONS]:
        lines.append(f"{name}: {caption}"[:200])
    if len(shown) > SUMMARY_CAPTIONS:
        lines.append(f"… and {len(shown) - SUMMARY_CAPTIONS} more in the captions output.")
    return "\n".join(lines)
