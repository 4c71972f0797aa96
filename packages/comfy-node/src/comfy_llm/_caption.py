"""Captioning many images under one resident model: the path the caption node and CLI share.

One resolution, one staging and one resident load serve the whole batch;
each image is one request through the resident manager (same seeds, same
result as a single run). A caption file ``<stem>.txt`` is written next to
each image from a folder, atomically (a temporary file renamed into place),
so a cancelled batch leaves every file it finished intact and never a
half-written one. An image that cannot be read is reported for that image
and the batch goes on.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from comfy_llm_inputs import InputError
from comfy_llm_profiles import ProgressCallback, ProgressEvent, ProgressStage, ignore_progress
from comfy_llm_residency import GenerationSettings, HostListener, TokenCallback, get_manager

from comfy_llm._backends import create_backend
from comfy_llm._pipeline import LLMRequest, prepare_request_inputs, resolve_and_stage
from comfy_llm._storage import storage_root
from comfy_llm._targets import detect_target
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


def _write_atomically(path: Path, text: str) -> None:
    if path.is_symlink():
        raise OSError(f"{path} is a symlink; caption files are never written through links")
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _image_input(item: CaptionItem) -> Any:
    if item.pixels is not None:
        return item.pixels
    from comfy_llm._cli_run import load_image_files

    return load_image_files([str(item.path)])


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
            (files already written stay).
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

    def inner(event: ProgressEvent) -> None:
        if event.stage not in _PER_IMAGE_STAGES:  # the bar counts images, not tokens
            progress(event)

    def counted(done: int, name: str) -> None:
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

    captions: list[str] = []
    records: list[dict[str, Any]] = []
    model_metadata: dict[str, Any] = {}
    for index, item in enumerate(items):
        record: dict[str, Any] = {"name": item.name}
        item_started = time.monotonic()
        target_file = item.caption_path if job.write_files else None
        existing = item.caption_path
        if job.skip_existing and existing is not None and existing.is_file():
            captions.append(existing.read_text(encoding="utf-8", errors="replace").strip())
            record["status"] = "kept_existing"
        else:
            try:
                request = LLMRequest(
                    model=job.model,
                    prompt=job.prompt,
                    system_prompt=job.system_prompt,
                    images=_image_input(item),
                    settings=job.settings,
                )
                prepared = prepare_request_inputs(request, profile, inner)
            except (InputError, ValueError, OSError) as error:
                from comfy_llm_core import render_error

                captions.append("")
                record.update(status="failed", error=render_error(error))
            else:
                result = manager.run(
                    profile,
                    snapshot.path,
                    prepared,
                    job.settings,
                    reserve_gb=job.reserve_gb,
                    keep_loaded=job.keep_loaded or index < len(items) - 1,
                    progress=inner,
                    on_token=on_token,
                    prompt_id=prompt_id,
                )
                prefix = job.prefix.strip()
                caption = f"{prefix}, {result.response}" if prefix else result.response
                captions.append(caption)
                model_metadata = dict(result.metadata)
                record.update(
                    status="captioned",
                    output_tokens=result.metadata.get("output_tokens"),
                    cache_status=result.metadata.get("cache_status"),
                )
                if target_file is not None:
                    if target_file.exists() and not job.overwrite:
                        record["written"] = False
                        record["note"] = "caption file exists; enable overwrite to replace it"
                    else:
                        _write_atomically(target_file, caption + "\n")
                        record["written"] = True
        record["seconds"] = round(time.monotonic() - item_started, 4)
        records.append(record)
        counted(index + 1, item.name)
    seconds = time.monotonic() - started
    captioned = sum(1 for r in records if r["status"] == "captioned")
    metadata: dict[str, Any] = {
        "images": len(items),
        "captioned": captioned,
        "kept_existing": sum(1 for r in records if r["status"] == "kept_existing"),
        "failed": sum(1 for r in records if r["status"] == "failed"),
        "written": sum(1 for r in records if r.get("written")),
        "seconds": round(seconds, 4),
        "captions_per_second": round(captioned / seconds, 4) if seconds > 0 and captioned else 0.0,
        "per_image": records,
        "profile_id": profile.profile_id,
        "repository": profile.repository,
        "revision": profile.revision,
        "backend": profile.backend,
        "execution_target": target.value,
        "snapshot_downloaded": snapshot.downloaded,
        "last_request": model_metadata,
    }
    if prompt_id:
        metadata["prompt_id"] = prompt_id
    return CaptionBatch(captions=captions, metadata=metadata)
