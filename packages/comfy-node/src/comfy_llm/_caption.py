"""Captioning many images under one resident model: the path the caption node and CLI share.

One resolution, one staging and one resident load serve the whole batch.
The images still to caption go to the resident manager's ``run_batch`` in
chunks of ``batch_size``: an engine that batches (vLLM; Transformers and
MLX-VLM for greedy decoding) generates a chunk together, others one image at
a time,
and every caption equals a single run's with the same seed. A caption file
``<stem>.txt`` is written next to each image from a folder, atomically (a
temporary file renamed into place), as soon as its chunk ends, so Cancel
keeps every file of the chunks already finished and never leaves a
half-written one. An image that cannot be read is reported for that image
and the batch goes on. Progress counts images.
"""

from __future__ import annotations

import dataclasses
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
    render_error,
    write_atomically,
)
from comfy_llm_inputs import InputError
from comfy_llm_residency import (
    HostListener,
    RunMetadata,
    TokenCallback,
    create_backend,
    get_manager,
)
from comfy_llm_residency.backend import BatchItem, GenerationSettings

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

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".webp", ".bmp", ".gif", ".tif", ".tiff"})
MAX_CAPTION_IMAGES = 10_000
_PER_IMAGE_STAGES = frozenset({ProgressStage.GENERATE, ProgressStage.DONE})


@dataclasses.dataclass(frozen=True)
class CaptionItem:
    """One image to caption.

    Attributes:
        name: The file name, or ``"image N"`` for a slice of an IMAGE batch.
        path: The image file (folder input), else None.
        pixels: One ``[1, H, W, C]`` slice of a ComfyUI IMAGE batch, else None.
    """

    name: str
    path: Path | None = None
    pixels: Any = None

    @property
    def caption_path(self) -> Path | None:
        """Where this image's caption file goes (only images from a folder have one)."""
        return None if self.path is None else self.path.with_suffix(".txt")


@dataclasses.dataclass(frozen=True)
class CaptionJob:
    """What every image of a batch shares.

    Attributes:
        model: ``owner/model[@revision]`` or a curated id.
        prompt: The captioning instruction.
        system_prompt: Optional system prompt.
        settings: Sampling settings (the same seed for every image).
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
    """The image files directly in ``folder``, sorted by name.

    Hidden files and non-images are ignored; a symlink is followed only when
    it stays inside the folder.

    Raises:
        CaptionFolderError: Not a folder, a symlink leaving it, or more than ``limit`` images.
    """
    base = Path(folder).expanduser()
    if not base.is_dir():
        raise CaptionFolderError(str(base), "is not a folder")
    real_base = base.resolve()
    found: list[Path] = []
    for entry in sorted(base.iterdir(), key=lambda p: p.name):
        if entry.name.startswith(".") or entry.suffix.lower() not in IMAGE_SUFFIXES:
            continue
        if entry.is_symlink() and not entry.resolve().is_relative_to(real_base):
            raise CaptionFolderError(
                str(base), f"{entry.name!r} is a symlink to a file outside the folder"
            )
        if entry.is_file():
            found.append(entry)
    if len(found) > limit:
        raise CaptionFolderError(
            str(base), f"holds {len(found)} images, more than the limit of {limit}"
        )
    return found


def caption_items(images: Any = None, folder: str | Path | None = None) -> list[CaptionItem]:
    """The items of a batch: the IMAGE batch's slices first, then the folder's files."""
    items: list[CaptionItem] = []
    if images is not None:
        count = int(images.shape[0]) if hasattr(images, "shape") else len(images)
        items.extend(
            CaptionItem(name=f"image {i + 1}", pixels=images[i : i + 1]) for i in range(count)
        )
    if folder:
        items.extend(CaptionItem(name=path.name, path=path) for path in find_images(folder))
    return items


def _image_input(item: CaptionItem) -> Any:
    if item.pixels is not None:
        return item.pixels
    from comfy_llm_inputs import images_from_files

    return list(images_from_files([str(item.path)]))


@dataclasses.dataclass
class _Pending:
    """An image whose inputs are prepared and whose caption the next chunk generates."""

    index: int
    item: CaptionItem
    prepared: Any
    started: float


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
        raise CaptionFolderError("(no input)", "has no images: connect images or give a folder")
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

    def counted(name: str) -> None:
        nonlocal done
        done += 1
        progress(
            ProgressEvent(
                stage=ProgressStage.GENERATE,
                message=f"Captioned {done}/{len(items)} images ({name})",
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
    chunks = [todo[at : at + job.batch_size] for at in range(0, len(todo), job.batch_size)]
    pending_indices = set(todo)
    for index, item in enumerate(items):
        if index not in pending_indices:
            existing = item.caption_path
            assert existing is not None
            captions[index] = existing.read_text(encoding="utf-8", errors="replace").strip()
            records[index].update(status="kept_existing", seconds=0.0)
            counted(item.name)
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
        pending = _prepare(
            job, items, chunk, profile=profile, progress=inner, records=records, counted=counted
        )
        if not pending:
            continue
        results = manager.run_batch(
            profile,
            snapshot.path,
            [BatchItem(p.prepared, job.settings) for p in pending],
            reserve_gb=job.reserve_gb,
            keep_loaded=job.keep_loaded or number < len(chunks) - 1,
            progress=inner,
            on_token=tokens,
            prompt_id=prompt_id,
        )
        for entry, result in zip(pending, results, strict=True):
            captions[entry.index] = _finish(job, entry, result, records[entry.index], number)
            last_request = result.metadata.to_dict()
            counted(entry.item.name)
    metadata = _summary(job, items, records, time.monotonic() - started, last_request)
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
    return job.skip_existing and existing is not None and existing.is_file()


def _prepare(
    job: CaptionJob,
    items: Sequence[CaptionItem],
    chunk: Sequence[int],
    *,
    profile: Any,
    progress: ProgressCallback,
    records: list[dict[str, Any]],
    counted: Callable[[str], None],
) -> list[_Pending]:
    """Prepare a chunk's inputs; an image that cannot be read is reported and left out."""
    pending: list[_Pending] = []
    for index in chunk:
        item = items[index]
        item_started = time.monotonic()
        try:
            request = LLMRequest(
                model=job.model,
                prompt=job.prompt,
                system_prompt=job.system_prompt,
                images=_image_input(item),
                settings=job.settings,
            )
            prepared = prepare_request_inputs(request, profile, progress)
        except (InputError, ValueError, OSError) as error:
            records[index].update(
                status="failed",
                error=render_error(error),
                seconds=round(time.monotonic() - item_started, 4),
            )
            counted(item.name)
        else:
            pending.append(_Pending(index, item, prepared, item_started))
    return pending


def _finish(
    job: CaptionJob, entry: _Pending, result: Any, record: dict[str, Any], chunk: int
) -> str:
    """The caption of one finished image: its record, and its file written atomically."""
    metadata: RunMetadata = result.metadata
    prefix = job.prefix.strip()
    caption = f"{prefix}, {result.response}" if prefix else result.response
    generation, batch = metadata.generation, metadata.batch
    record.update(
        status="captioned",
        output_tokens=generation.output_tokens,
        cache_status=metadata.residency.cache_status,
        generation_seconds=generation.generation_seconds,
        time_to_first_token_seconds=generation.time_to_first_token_seconds,
        batched=batch.batched if batch is not None else None,
        batch_size=batch.batch_size if batch is not None else None,
        chunk=chunk,
    )
    target_file = entry.item.caption_path if job.write_files else None
    if target_file is not None:
        if target_file.exists() and not job.overwrite:
            record["written"] = False
            record["note"] = "caption file exists; enable overwrite to replace it"
        else:
            write_atomically(target_file, caption + "\n")
            record["written"] = True
    record["seconds"] = round(time.monotonic() - entry.started, 4)
    return caption


def _summary(
    job: CaptionJob,
    items: Sequence[CaptionItem],
    records: list[dict[str, Any]],
    seconds: float,
    last_request: dict[str, Any],
) -> dict[str, Any]:
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
        "per_image": records,
        "last_request": last_request,
    }
