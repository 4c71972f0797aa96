"""One image's outcome, the same for the local and the Modal path.

An item kept on disk is not captioned again (:func:`kept_on_disk`); every
other one gets its own seed (:func:`item_settings`); a finished one is
cleaned, composed and written atomically (:func:`finish_caption`); the batch
ends with one summary of every record (:func:`batch_summary`). ``_caption``
and ``_caption_modal`` call these, so both paths keep the same file rules and
the same metadata keys.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

from comfy_llm_core import item_seed
from comfy_llm_inputs import PreparedInputs
from comfy_llm_residency import InferenceResult
from comfy_llm_residency.backend import GenerationSettings

from comfy_llm._caption_cleanup import clean_caption, cleanup_counts
from comfy_llm._caption_clip import check_clip_tokens
from comfy_llm._caption_conventions import compose_caption, existing_mode, store_caption
from comfy_llm._caption_job import CaptionItem, CaptionJob
from comfy_llm._json import JsonRecord

__all__ = ["Pending", "batch_summary", "finish_caption", "item_settings", "kept_on_disk"]


@dataclasses.dataclass
class Pending:
    """An image whose caption the next chunk generates.

    ``prepared`` is its inputs on the local path; None on the Modal path, where
    the worker prepares them.
    """

    index: int
    item: CaptionItem
    prepared: PreparedInputs | None
    started: float


def kept_on_disk(job: CaptionJob, item: CaptionItem) -> bool:
    existing = item.caption_path
    mode = existing_mode(job.conventions, job.skip_existing, job.overwrite)
    return mode == "skip_existing" and existing is not None and existing.is_file()


def item_settings(job: CaptionJob, item: CaptionItem) -> GenerationSettings:
    """The job's settings with this image's own seed (see the module docstring)."""
    return dataclasses.replace(job.settings, seed=item_seed(job.settings.seed, item.name))


def finish_caption(
    job: CaptionJob, entry: Pending, result: InferenceResult, record: JsonRecord, chunk: int
) -> str:
    """The caption of one finished image: its record, and its file written atomically.

    An answer that still fails ``response_schema`` after its retry is a failed
    image (no caption, no file), with the validator's reason.
    """
    metadata = result.metadata.to_dict()  # the flat keys metadata_json shows
    if metadata.get("schema_valid") is False:
        cut = " (cut off at max_new_tokens)" if metadata.get("finish_reason") == "length" else ""
        record.update(
            status="failed",
            error=f"the answer does not satisfy response_schema{cut}: "
            f"{metadata.get('schema_problem')}",
            seconds=round(time.monotonic() - entry.started, 4),
        )
        return ""
    item, cleanup = entry.item, job.conventions.cleanup
    answer, record["cleaned"] = clean_caption(result.response, cleanup)
    caption = compose_caption(job.prefix, answer, job.conventions, item.path, item.name)
    record.update(
        status="captioned",
        # the seed the engine ran this image with (a single run reproduces it)
        seed=(metadata.get("generation_settings") or {}).get("seed"),
        output_tokens=metadata.get("output_tokens"),
        cache_status=metadata.get("cache_status"),
        generation_seconds=metadata.get("generation_seconds"),
        time_to_first_token_seconds=metadata.get("time_to_first_token_seconds"),
        batched=metadata.get("batched"),
        batch_size=metadata.get("batch_size"),
        chunk=chunk,
    )
    target_file = item.caption_path if job.write_files else None
    if target_file is not None:
        mode = existing_mode(job.conventions, job.skip_existing, job.overwrite)
        separator = job.conventions.separator
        caption = store_caption(
            target_file, caption, record, mode=mode, separator=separator, model=job.model
        )
    record["seconds"] = round(time.monotonic() - entry.started, 4)
    return caption


def batch_summary(
    job: CaptionJob,
    items: Sequence[CaptionItem],
    records: list[JsonRecord],
    seconds: float,
    last_request: JsonRecord,
    *,
    captions: Sequence[str],
) -> JsonRecord:
    """The batch's metadata: counts, speed, cleanup and CLIP counts, records, last request."""
    clip_tokens = check_clip_tokens(captions, records, job.clip_tokenizer)
    captioned = [r for r in records if r.get("status") == "captioned"]
    return {
        "images": len(items),
        "captioned": len(captioned),
        "kept_existing": sum(1 for r in records if r.get("status") == "kept_existing"),
        "failed": sum(1 for r in records if r.get("status") == "failed"),
        "written": sum(1 for r in records if r.get("written")),
        "seconds": round(seconds, 4),
        "captions_per_second": (
            round(len(captioned) / seconds, 4) if seconds > 0 and captioned else 0.0
        ),
        "batched": any(r.get("batched") for r in captioned),
        "batch_size": job.batch_size,
        "engine_batch_size": max((r.get("batch_size") or 1 for r in captioned), default=1),
        "cleanup": cleanup_counts(records),
        "clip_tokens": clip_tokens,
        "per_image": records,
        "last_request": last_request,
    }
