"""Captioning many images under one resident model: the path the caption node and CLI share.

One resolution, one staging and one resident load serve the whole batch.
The images still to caption go to the resident manager's ``run_batch`` in
chunks of ``batch_size``: an engine that batches (vLLM; Transformers and
MLX-VLM for greedy decoding) generates a chunk together, others one image at
a time. vLLM batches continuously, so its chunks hold at least twice the
engine's ``max_num_seqs`` whatever ``batch_size`` says (the rule is
profiles' ``engine_batch_size``, which the Modal worker reads too), and the engine is fed
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

from comfy_llm_core import (
    ProgressCallback,
    ProgressEvent,
    ProgressStage,
    ignore_progress,
    render_error,
)
from comfy_llm_inputs import InputError
from comfy_llm_profiles import ModelProfile, engine_batch_size
from comfy_llm_residency import (
    HostListener,
    TokenCallback,
    create_backend,
    get_manager,
)
from comfy_llm_residency.backend import BatchItem

from comfy_llm._caption_conventions import (
    counted_message,
    read_caption_file,
)
from comfy_llm._caption_job import CaptionBatch, CaptionItem, CaptionJob
from comfy_llm._caption_media import media_input
from comfy_llm._caption_records import (
    Pending,
    batch_summary,
    finish_caption,
    item_settings,
    kept_on_disk,
)
from comfy_llm._json import JsonRecord
from comfy_llm._pipeline import LLMRequest, prepare_request_inputs, resolve_and_stage
from comfy_llm._storage import storage_root
from comfy_llm._targets import detect_target
from comfy_llm._versions import loaded_versions, note_engine
from comfy_llm.errors import CaptionFolderError

__all__ = ["run_captions"]

_PER_IMAGE_STAGES = frozenset({ProgressStage.GENERATE, ProgressStage.DONE})


@dataclasses.dataclass
class _Chunk:
    """One chunk's prepared images and the ones that could not be read."""

    pending: list[Pending]
    failed: list[tuple[int, str, float]]  # (index, error, seconds)


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
    records: list[JsonRecord] = [{"name": item.name} for item in items]
    last_request: JsonRecord = {}
    todo = [i for i, item in enumerate(items) if not kept_on_disk(job, item)]
    size = engine_batch_size(profile, job.batch_size)  # vLLM: at least 2 x max_num_seqs
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
                [_batch_item(job, entry) for entry in ready.pending],
                reserve_gb=job.reserve_gb,
                keep_loaded=job.keep_loaded or number < len(chunks) - 1,
                progress=inner,
                on_token=tokens,
                prompt_id=prompt_id,
            )
            for entry, result in zip(ready.pending, results, strict=True):
                captions[entry.index] = finish_caption(
                    job, entry, result, records[entry.index], number
                )
                last_request = result.metadata.to_dict()
                counted(entry.index)
    finally:
        stop.set()  # a chunk still being prepared stops at its next image
        feeder.shutdown(wait=True, cancel_futures=True)
    elapsed = time.monotonic() - started
    metadata = batch_summary(job, items, records, elapsed, last_request, captions=captions)
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


def _batch_item(job: CaptionJob, entry: Pending) -> BatchItem:
    assert entry.prepared is not None  # the local path prepares every pending image
    return BatchItem(entry.prepared, item_settings(job, entry.item))


def _prepare(
    job: CaptionJob,
    items: Sequence[CaptionItem],
    chunk: Sequence[int],
    *,
    profile: ModelProfile,
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
                inputs=media_input(item.pixels, item.path, profile),
                settings=job.settings,
            )
            prepared = prepare_request_inputs(request, profile, progress)
        except (InputError, ValueError, OSError) as error:
            seconds = round(time.monotonic() - item_started, 4)
            ready.failed.append((index, render_error(error), seconds))
        else:
            ready.pending.append(Pending(index, item, prepared, item_started))
    return ready
