"""A captioning job's vocabulary: the items, what they share, and what comes back.

``CaptionItem`` is one image or clip (a slice of an IMAGE batch, or a file of
a folder, found by ``_caption_media``); ``CaptionJob`` is what every item
shares (model, prompt, settings, the file rules); ``CaptionBatch`` is the
answer, the captions in input order and one JSON-ready summary. The local
path (``_caption``) and the Modal path (``_caption_modal``) both take and
give these.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from comfy_llm_core import InvalidSettingError, defaults
from comfy_llm_residency.backend import GenerationSettings

from comfy_llm._caption_conventions import CaptionConventions
from comfy_llm._caption_media import MAX_CAPTION_IMAGES, find_media, item_name
from comfy_llm._json import JsonRecord
from comfy_llm.errors import CaptionFolderError

__all__ = [
    "CaptionBatch",
    "ImageBatch",
    "CaptionItem",
    "CaptionJob",
    "caption_items",
    "find_images",
]


class ImageBatch(Protocol):
    """A ComfyUI IMAGE batch (``[N, H, W, C]``), or a list of images: sized and sliced."""

    def __len__(self) -> int:
        """The number of images."""

    def __getitem__(self, index: slice, /) -> object:
        """The images in ``index`` (one slice is one image, batch-shaped)."""


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
    pixels: object = None
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
    metadata: JsonRecord


def find_images(folder: str | Path, *, limit: int = MAX_CAPTION_IMAGES) -> list[Path]:
    """The image files directly in ``folder``, sorted by name (see ``find_media``).

    Raises:
        CaptionFolderError: Not a folder, a symlink leaving it, or more than ``limit`` images.
    """
    return find_media(folder, limit=limit, videos=False)


def caption_items(
    images: ImageBatch | None = None,
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
        count = len(images)
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
