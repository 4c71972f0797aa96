"""Captioning many images under one resident model: the path the caption node and CLI share.

One resolution, one staging and one resident load serve the whole batch.
The images still to caption go to the resident manager's ``run_batch`` in
chunks of ``batch_size``: an engine that batches (vLLM; Transformers and
MLX-VLM for greedy decoding) generates a chunk together, others one image at
a time. vLLM batches continuously, so its chunks hold at least twice the
engine's ``max_num_seqs`` whatever ``batch_size`` says, and the engine is fed
continuously: the next chunk's images are decoded and prepared on a worker
thread while the current chunk runs. Every image gets its own seed, derived
from the job's seed and the image's name (:func:`comfy_llm_core.item_seed`),
so a rerun reproduces each caption and no two captions share a noise
stream; each caption equals a single run's with that seed. A caption file
``<stem>.txt`` is written next to each image from a folder, atomically (a
temporary file renamed into place), as soon as its chunk ends, so Cancel
keeps every file of the chunks already finished and never leaves a
half-written one. An image that cannot be read is reported for that image
and the batch goes on. Progress counts images.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from comfy_llm_core import (
    InvalidSettingError,
    ProgressCallback,
    ProgressEvent,
    ProgressStage,
    defaults,
    ignore_progress,
    item_seed,
    render_error,
)
from comfy_llm_inputs import InputError
from comfy_llm_residency import (
    HostListener,
    TokenCallback,
    create_backend,
    get_manager,
)
from comfy_llm_residency.backend import BatchItem, GenerationSettings

from comfy_llm._caption_cleanup import clean_caption, cleanup_counts
from comfy_llm._caption_clip import check_clip_tokens
from comfy_llm._caption_conventions import (
    CaptionConventions,
    compose_caption,
    counted_message,
    existing_mode,
    read_caption_file,
    store_caption,
)
from comfy_llm._caption_media import IMAGE_SUFFIXES, MAX_CAPTION_IMAGES, find_media, item_name
from comfy_llm._caption_media import media_input as _media_input
from comfy_llm._pipeline import LLMRequest, prepare_request_inputs, resolve_and_stage
from comfy_llm._storage import storage_root
from comfy_llm._targets import detect_target
from comfy_llm._versions import loaded_versions, note_engine
from comfy_llm.errors import CaptionFolderError

__all__ = [
    "IMAGE_SUFFIXES",
    "MAX_CAPTION_IMAGES",
    "CaptionBatch",
    "CaptionItem",
    "CaptionJob",
    "caption_items",
    "find_images",
    "run_captions",
]

_PER_IMAGE_STAGES = frozenset({ProgressStage.GENERATE, ProgressStage.DONE})


@dataclasses.dataclass(frozen=True)
class CaptionItem:
    """One image to caption.

    Attributes:
        name: The file name, or ``"image N"`` for a slice of an IMAGE batch.
        path: The image file (folder input), else None.
        pixels: One ``[1, H, W, C]`` slice of a ComfyUI IMAGE batch, else None.
        caption_extension: The caption file's extension (``_caption_conventions``).
    """

    name: str
    path: Path | None = None
    pixels: Any = None
    caption_extension: str = ".txt"

    @property
    def caption_path(self) -> Path | None:
        """Where this image's caption file goes (only images from a folder have one)."""
        return None if self.path is None else self.path.with_suffix(self.caption_extension)


@dataclasses.dataclass(frozen=True)
class CaptionJob:
    """What every image of a batch shares.

    Attributes:
        model: ``owner/model[@revision]`` or a curated id.
        prompt: The captioning instruction.
        system_prompt: Optional system prompt.
        settings: Sampling settings; each image's seed derives from ``seed``.
        prefix: Text put before every caption (a LoRA trigger word), "" for none.
        write_files: Write ``<stem>.txt`` next to each image from a folder.
        skip_existing: Keep captions already on disk and do not caption those images.
        overwrite: Replace an existing caption file (otherwise it is left alone).
        target: Execution target name, else detected.
        storage_root: Storage root, else the default.
        reserve_gb: Memory to keep free beyond the model.
        keep_loaded: Keep the model resident after the batch.
        batch_size: Images handed to the engine at once (1 to
            ``defaults.MAX_CAPTION_BATCH_SIZE``).
        conventions: Suffix, templating, mode, extension, manifest, subfolders.
        clip_tokenizer: A CLIP tokenizer folder to count captions with (else
            ComfyUI's, where found; ``_caption_clip``).
    """

    model: str
    prompt: str
    system_prompt: str | None = None
    settings: GenerationSettings = dataclasses.field(default_factory=GenerationSettings)
    prefix: str = ""
    write_files: bool = False
    skip_existing: bool = True
    overwrite: bool = False
    target: str | None = None
    storage_root: str | Path | None = None
    reserve_gb: float | None = None
    keep_loaded: bool = True
    batch_size: int = defaults.CAPTION_BATCH_SIZE
    conventions: CaptionConventions = dataclasses.field(default_factory=CaptionConventions)
    clip_tokenizer: str | Path | None = None

    def __post_init__(self) -> None:
        """Check the batch size.

        Raises:
            InvalidSettingError: Not a whole number from 1 to the maximum.
        """
        size, limit = self.batch_size, defaults.MAX_CAPTION_BATCH_SIZE
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= limit:
            raise InvalidSettingError(
                "batch_size", size, f"a whole number from 1 to {limit} (images per engine batch)"
            )


@dataclasses.dataclass(frozen=True)
class CaptionBatch:
    """The captions, in input order, and one JSON-ready metadata record."""

    captions: list[str]
    metadata: dict[str, Any]


def find_images(folder: str | Path, *, limit: int = MAX_CAPTION_IMAGES) -> list[Path]:
    """The image files directly in ``folder``, sorted by name (see ``find_media``).

    Raises:
        CaptionFolderError: Not a folder, a symlink leaving it, or more than ``limit`` images.
    """
    return find_media(folder, limit=limit, videos=False)


def caption_items(
    images: Any = None,
    folder: str | Path | None = None,
    conventions: CaptionConventions | None = None,
) -> list[CaptionItem]:
    """The items of a batch: the IMAGE batch's slices first, then the folder's files.

    The folder's images and videos (and its subfolders' with
    ``conventions.subfolders``) are found by ``_caption_media.find_media``.

    Raises:
        CaptionFolderError: As ``find_media``, or two files that would share
            one caption file (``a.png`` and ``a.jpg``).
    """
    conventions = conventions or CaptionConventions()
    items: list[CaptionItem] = []
    if images is not None:
        count = int(images.shape[0]) if hasattr(images, "shape") else len(images)
        items.extend(
            CaptionItem(name=f"image {i + 1}", pixels=images[i : i + 1]) for i in range(count)
        )
    if folder:
        found = find_media(folder, subfolders=conventions.subfolders, **conventions.selection)
        items.extend(
            CaptionItem(item_name(path, folder), path, caption_extension=conventions.extension)
            for path in found
        )
        _refuse_shared_caption_files(str(folder), items)
    return items


def _refuse_shared_caption_files(folder: str, items: Sequence[CaptionItem]) -> None:
    seen: dict[Path, str] = {}
    for item in items:
        target = item.caption_path
        if target is None:
            continue
        if target in seen:
            raise CaptionFolderError(
                folder,
                f"{seen[target]!r} and {item.name!r} would share the caption file "
                f"{target.name!r}: rename one of them",
            )
        seen[target] = item.name


@dataclasses.dataclass
class _Pending:
    """An image whose inputs are prepared and whose caption the next chunk generates."""

    index: int
    item: CaptionItem
    prepared: Any
    started: float


@dataclasses.dataclass
class _Chunk:
    """One chunk's prepared images and the ones that could not be read."""

    pending: list[_Pending]
    failed: list[tuple[int, str, float]]  # (index, error, seconds)


def chunk_size(job: CaptionJob, profile: Any) -> int:
    """Images handed to the engine at once: ``batch_size``; vLLM at least 2 x ``max_num_seqs``.

    vLLM schedules continuously: a chunk smaller than its width leaves the
    engine half empty at every chunk's tail (vLLM review r2, F5).
    """
    if getattr(profile, "backend", None) != "vllm":
        return job.batch_size
    width = dict(profile.backend_options).get("max_num_seqs")
    return max(job.batch_size, 2 * width if isinstance(width, int) and width > 0 else 0)


def run_captions(
    job: CaptionJob,
    items: Sequence[CaptionItem],
    *,
    progress: ProgressCallback = ignore_progress,
    on_token: TokenCallback | None = None,
    free_host_memory: Callable[[int], None] | None = None,
    prompt_id: str | None = None,
    host_listener: HostListener | None = None,
) -> CaptionBatch:
    """Caption every item in order; see the module docstring.

    Raises:
        CaptionFolderError: No items.
        ProfileError, StagingError, ResidencyError: As for one request.
        BaseException: An interrupt from ``on_token``/``progress``, unchanged
            (files of the chunks already finished stay).
    """
    if not items:
        raise CaptionFolderError("", "no images are connected and no folder is given")
    started = time.monotonic()
    target = detect_target(job.target)
    root = storage_root(job.storage_root)
    resolved, snapshot = resolve_and_stage(job.model, target, root, progress)
    profile = resolved.profile
    manager = get_manager(
        target,
        backend_factory=create_backend,
        free_host_memory=free_host_memory,
        host_listener=host_listener,
    )
    done = 0

    def inner(event: ProgressEvent) -> None:
        if event.stage not in _PER_IMAGE_STAGES:  # the bar counts images, not tokens
            progress(event)

    def counted(index: int) -> None:
        nonlocal done
        done += 1
        progress(
            ProgressEvent(
                stage=ProgressStage.GENERATE,
                message=counted_message(done, len(items), items[index].name, records[index]),
                value=float(done),
                maximum=float(len(items)),
                unit="images",
                elapsed_seconds=time.monotonic() - started,
            )
        )

    announce: list[ProgressEvent] = []  # the chunk's status, shown again at its first token

    def tokens(index: int, token_id: int, text: str) -> None:
        if announce:  # the model is generating now: the status names the images again
            progress(announce.pop())
        if on_token is not None:
            on_token(token_id, text)

    captions: list[str] = [""] * len(items)
    records: list[dict[str, Any]] = [{"name": item.name} for item in items]
    last_request: dict[str, Any] = {}
    todo = [i for i, item in enumerate(items) if not _kept(job, item)]
    size = chunk_size(job, profile)
    chunks = [todo[at : at + size] for at in range(0, len(todo), size)]
    pending_indices = set(todo)
    for index, item in enumerate(items):
        if index not in pending_indices:
            existing = item.caption_path
            assert existing is not None
            captions[index] = read_caption_file(existing)
            records[index].update(status="kept_existing", seconds=0.0)
            counted(index)
    stop = threading.Event()
    feeder = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="caption-feed")

    def prepare(chunk: Sequence[int], events: ProgressCallback) -> _Chunk:
        return _prepare(job, items, chunk, profile=profile, progress=events, stop=stop)

    # the first chunk is prepared here (its progress shows); each later one on the feeder
    # while the engine runs the one before
    upcoming: concurrent.futures.Future[_Chunk] | None = None
    try:
        for number, chunk in enumerate(chunks):
            names = ", ".join(items[index].name for index in chunk[:3])
            more = f" and {len(chunk) - 3} more" if len(chunk) > 3 else ""
            status = ProgressEvent(
                stage=ProgressStage.GENERATE,
                message=f"Captioning {done + 1}/{len(items)}: {names}{more}",
                value=float(done),
                maximum=float(len(items)),
                unit="images",
                elapsed_seconds=time.monotonic() - started,
            )
            progress(status)
            announce[:] = [status]
            ready = upcoming.result() if upcoming is not None else prepare(chunk, inner)
            upcoming = None
            if number + 1 < len(chunks):
                upcoming = feeder.submit(prepare, chunks[number + 1], ignore_progress)
            for index, error, seconds in ready.failed:
                records[index].update(status="failed", error=error, seconds=seconds)
                counted(index)
            if not ready.pending:
                continue
            results = manager.run_batch(
                profile,
                snapshot.path,
                [BatchItem(p.prepared, _item_settings(job, p.item)) for p in ready.pending],
                reserve_gb=job.reserve_gb,
                keep_loaded=job.keep_loaded or number < len(chunks) - 1,
                progress=inner,
                on_token=tokens,
                prompt_id=prompt_id,
            )
            for entry, result in zip(ready.pending, results, strict=True):
                captions[entry.index] = _finish(job, entry, result, records[entry.index], number)
                last_request = result.metadata.to_dict()
                counted(entry.index)
    finally:
        stop.set()  # a chunk still being prepared stops at its next image
        feeder.shutdown(wait=True, cancel_futures=True)
    elapsed = time.monotonic() - started
    metadata = _summary(job, items, records, elapsed, last_request, captions=captions)
    metadata.update(
        profile_id=profile.profile_id,
        repository=profile.repository,
        revision=profile.revision,
        backend=profile.backend,
        execution_target=target.value,
        snapshot_downloaded=snapshot.downloaded,
        model_source=profile.source,
        resolved_offline=resolved.resolved_offline,
    )
    if prompt_id:
        metadata["prompt_id"] = prompt_id
    note_engine(profile.backend)
    metadata["comfy_llm_versions"] = loaded_versions()
    return CaptionBatch(captions=captions, metadata=metadata)


def _kept(job: CaptionJob, item: CaptionItem) -> bool:
    existing = item.caption_path
    mode = existing_mode(job.conventions, job.skip_existing, job.overwrite)
    return mode == "skip_existing" and existing is not None and existing.is_file()


def _item_settings(job: CaptionJob, item: CaptionItem) -> GenerationSettings:
    """The job's settings with this image's own seed (see the module docstring)."""
    return dataclasses.replace(job.settings, seed=item_seed(job.settings.seed, item.name))


def _prepare(
    job: CaptionJob,
    items: Sequence[CaptionItem],
    chunk: Sequence[int],
    *,
    profile: Any,
    progress: ProgressCallback,
    stop: threading.Event,
) -> _Chunk:
    """Decode and prepare a chunk's inputs; an image that cannot be read is noted, not raised.

    Runs on the caller's thread (the first chunk) or the feeder (the others):
    it touches no record and calls no host hook but ``progress``.
    """
    ready = _Chunk([], [])
    for index in chunk:
        if stop.is_set():
            break
        item = items[index]
        item_started = time.monotonic()
        try:
            request = LLMRequest(
                model=job.model,
                prompt=job.prompt,
                system_prompt=job.system_prompt,
                **_media_input(item.pixels, item.path, profile),
                settings=job.settings,
            )
            prepared = prepare_request_inputs(request, profile, progress)
        except (InputError, ValueError, OSError) as error:
            seconds = round(time.monotonic() - item_started, 4)
            ready.failed.append((index, render_error(error), seconds))
        else:
            ready.pending.append(_Pending(index, item, prepared, item_started))
    return ready


def _finish(
    job: CaptionJob, entry: _Pending, result: Any, record: dict[str, Any], chunk: int
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


def _summary(
    job: CaptionJob,
    items: Sequence[CaptionItem],
    records: list[dict[str, Any]],
    seconds: float,
    last_request: dict[str, Any],
    *,
    captions: Sequence[str],
) -> dict[str, Any]:
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
