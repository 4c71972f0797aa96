"""Captioning on N Modal GPUs: the caption node's and CLI's ``run_on_modal`` path.

The same job as :func:`comfy_llm._caption.run_captions` with the same file
rules — captions kept on disk are not captioned again (a rerun after a crash
or Cancel captions only what is missing), the prefix, atomic ``<stem>.txt``
files, overwrite, per-image errors with the rest going on — but the engine
work goes to ``modal_workers`` RemoteEngine containers through
``comfy_llm_modal_remote.caption_fan_out``. Each chunk's captions are
written here, through the local writer, as the chunk returns; Cancel
cancels every call and leaves every file already written. The bar counts
images across all workers; the metadata carries the fan-out's cost record.

A video clip in the folder is sampled here as the local batch samples it
(``defaults.VIDEO_FRAMES`` frames evenly over the clip: what ``media_input``
gives a model on the Modal target, whose video limit is 32 frames) and
travels as its frames (``encode_video_file``); a job with clips sends
``DEFAULT_CHUNK_IMAGES // VIDEO_FRAMES`` items per chunk unless told, so a
chunk carries about as many pictures as a chunk of images.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING

from comfy_llm_core import ProgressCallback, defaults
from comfy_llm_inputs import images_from_comfy
from comfy_llm_residency import InferenceResult, RunMetadata

from comfy_llm._caption_conventions import read_caption_file
from comfy_llm._caption_job import CaptionBatch, CaptionItem, CaptionJob
from comfy_llm._caption_media import is_video
from comfy_llm._caption_records import Pending, batch_summary, finish_caption, kept_on_disk
from comfy_llm._json import JsonRecord
from comfy_llm._pipeline import refuse_local_folder_on_modal
from comfy_llm._remote import modal_remote
from comfy_llm._storage import installation_dir, storage_root
from comfy_llm._versions import loaded_versions
from comfy_llm.errors import CaptionFolderError

if TYPE_CHECKING:  # the Modal extra is imported when the first Modal run starts
    from comfy_llm_modal_remote import ChunkImage, ChunkResult

__all__ = ["ModalCaptionOptions", "run_captions_on_modal"]


@dataclasses.dataclass(frozen=True)
class ModalCaptionOptions:
    """Where and how wide: the node's ``modal_gpu``/``modal_workers``, the CLI's flags.

    Attributes:
        gpu: Modal GPU type.
        workers: GPU containers at once.
        chunk_images: Images per chunk (None: the fan-out's default for the
            profile's engine; vLLM gets at least two of its sub-batches).
    """

    gpu: str
    workers: int = 1
    chunk_images: int | None = None


def run_captions_on_modal(
    job: CaptionJob,
    items: Sequence[CaptionItem],
    options: ModalCaptionOptions,
    *,
    progress: ProgressCallback,
    check_interrupt: Callable[[], None] | None = None,
    prompt_id: str | None = None,
) -> CaptionBatch:
    """Caption every item on Modal; see the module docstring.

    Raises:
        CaptionFolderError: No items.
        LocalFolderError: The model is a folder on this machine (not on the worker).
        InvalidSettingError: ``workers`` or ``chunk_images`` out of range
            (before Modal is reached).
        TargetUnavailableError: The ``modal`` extra is not installed.
        ModalUnavailableError: ``modal`` or its credentials are missing.
        BaseException: Cancel, unchanged (files already written stay).
    """
    if not items:
        raise CaptionFolderError("", "no images are connected and no folder is given")
    refuse_local_folder_on_modal(job.model)
    remote = modal_remote()
    started = time.monotonic()
    chunk_images = options.chunk_images  # None: the fan-out sizes it for the profile's engine
    if chunk_images is None and any(is_video(item.path) for item in items):
        # a clip is many pictures
        chunk_images = max(1, remote.DEFAULT_CHUNK_IMAGES // defaults.VIDEO_FRAMES)
    fan_job = remote.FanOutJob(
        model=job.model,
        prompt=job.prompt,
        system_prompt=job.system_prompt,
        settings=job.settings,
        gpu=options.gpu,
        workers=options.workers,
        chunk_images=chunk_images,
        batch_size=job.batch_size,
        reserve_gb=job.reserve_gb,
    )
    dispatcher = remote.connect(installation_dir(storage_root(job.storage_root)))
    captions: list[str] = [""] * len(items)
    records: list[JsonRecord] = [{"name": item.name} for item in items]
    images = []
    for index, item in enumerate(items):
        if kept_on_disk(job, item):
            existing = item.caption_path
            assert existing is not None
            captions[index] = read_caption_file(existing)
            records[index].update(status="kept_existing", seconds=0.0)
        else:
            images.append(remote.FanOutImage(index, item.name, _encoder(remote, index, item)))
    writer = _Writer(job, items, captions, records, started)
    report = None
    if images:
        report = remote.caption_fan_out(
            dispatcher,
            fan_job,
            images,
            writer,
            done_before=len(items) - len(images),
            total=len(items),
            progress=progress,
            check_interrupt=check_interrupt or (lambda: None),
        )
    elapsed = time.monotonic() - started
    metadata = batch_summary(job, items, records, elapsed, writer.last_request, captions=captions)
    metadata["execution_target"] = "modal"
    if report is not None:
        metadata.update(report.to_dict())
        profile = report.profile
        metadata.update(
            profile_id=profile.get("profile_id"),
            repository=profile.get("repository"),
            revision=profile.get("revision"),
            backend=profile.get("backend"),
        )
    if prompt_id:
        metadata["prompt_id"] = prompt_id
    metadata["comfy_llm_versions"] = loaded_versions()
    return CaptionBatch(captions=captions, metadata=metadata)


def _encoder(remote: ModuleType, index: int, item: CaptionItem) -> Callable[[], ChunkImage]:
    """Bytes worth sending for one item: a file as is when it fits, else reduced JPEG.

    A clip: its sampled frames. The item keeps its name in the job (its path
    below the folder), from which the worker derives its seed as the local
    batch does.
    """
    if item.path is not None and is_video(item.path):
        clip = item.path
        return lambda: remote.encode_video_file(
            clip, index=index, name=item.name, frames=defaults.VIDEO_FRAMES
        )
    if item.path is not None:
        path = item.path

        def from_file() -> ChunkImage:
            encoded = remote.encode_image_file(path, index=index)
            return dataclasses.replace(encoded, name=item.name)

        return from_file

    def from_pixels() -> ChunkImage:
        [image] = images_from_comfy(item.pixels)
        return remote.encode_pil_image(image, index=index, name=item.name)

    return from_pixels


class _Writer:
    """The collector: each returned chunk's captions through the local writer."""

    def __init__(
        self,
        job: CaptionJob,
        items: Sequence[CaptionItem],
        captions: list[str],
        records: list[JsonRecord],
        started: float,
    ) -> None:
        self._job = job
        self._items = items
        self._captions = captions
        self._records = records
        self._started = started
        self.last_request: JsonRecord = {}

    def captions(self, result: ChunkResult) -> None:
        for answer in result.captions:
            record = self._records[answer.index]
            if answer.error is not None:
                record.update(status="failed", error=answer.error, chunk=result.chunk_id)
                continue
            entry = Pending(answer.index, self._items[answer.index], None, self._started)
            metadata = RunMetadata.from_dict(answer.metadata)
            inference = InferenceResult(answer.response, answer.reasoning, metadata)
            self._captions[answer.index] = finish_caption(
                self._job, entry, inference, record, result.chunk_id
            )
            self.last_request = dict(answer.metadata)

    def failed(self, indices: Sequence[int], message: str) -> None:
        for index in indices:
            self._records[index].update(status="failed", error=message)
