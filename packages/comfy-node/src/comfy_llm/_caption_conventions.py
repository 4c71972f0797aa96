"""What a LoRA trainer expects of a caption file: text, name, mode, manifest.

The conventions the caption node and ``comfy-llm caption`` share (the peers
review's table of captioners, §4):

* Prefix and suffix joined to the caption with one separator that never
  doubles: ``"sks cat,"`` + ``"a cat"`` is ``"sks cat, a cat"``, never
  ``"sks cat,, a cat"``. kohya's ``keep_tokens`` wants the trigger first, so
  the prefix comes first.
* Templating in the prefix and suffix: ``{name}`` (the file's stem),
  ``{folder}`` (its folder's name) and ``[trigger]``, which is replaced by a
  given trigger word and otherwise left for ai-toolkit, which replaces
  ``[trigger]`` with its ``trigger_word`` when it trains.
* What to do with an image that already has a caption file: keep it and do
  not caption the image (``skip_existing``, the default), ``overwrite`` it,
  ``append`` or ``prepend`` the new caption to it.
* The caption file's extension (kohya and musubi-tuner's
  ``caption_extension``): ``.txt`` (what ComfyUI's
  ``LoadImageTextSetFromFolderNode`` reads), ``.caption``, or ``.json`` (a
  sidecar holding the caption and what made it).
* A JSONL manifest, one line per captioned file, in the shape musubi-tuner's
  ``image_jsonl_file``/``video_jsonl_file`` read (``image_path`` or
  ``video_path``, absolute, and ``caption``) plus ``media_path`` relative to
  the manifest's folder (LTX-2's trainer reads a media column relative to
  its dataset file).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import re
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from comfy_llm_core import InvalidSettingError, write_atomically

from comfy_llm._caption_cleanup import CLEANUP_RULES
from comfy_llm._caption_media import is_video
from comfy_llm._json import JsonRecord

__all__ = [
    "CAPTION_EXTENSIONS",
    "CAPTION_MODES",
    "CSV_NAME",
    "MANIFEST_NAME",
    "CaptionConventions",
    "check_template",
    "checked_conventions",
    "compose_caption",
    "counted_message",
    "existing_mode",
    "join_caption",
    "merge_existing",
    "read_caption_file",
    "store_caption",
    "write_batch_manifest",
    "write_caption_file",
    "write_csv",
    "write_manifest",
]

CAPTION_MODES = ("skip_existing", "overwrite", "append", "prepend")
"""What to do with an image that already has a caption file (the node's combo)."""
CAPTION_EXTENSIONS = (".txt", ".caption", ".json")
"""The node's choices; the CLI takes any short ``.name``."""
MANIFEST_NAME = "metadata.jsonl"
CSV_NAME = "metadata.csv"
_EXTENSION = re.compile(r"\.[A-Za-z0-9_-]{1,15}")
_FIELD = re.compile(r"\{([^{}]*)\}")
_FIELDS = ("name", "folder")
_TRAILING_STOPS = ",;:.!?"


@dataclasses.dataclass(frozen=True)
class CaptionConventions:
    """The caption files' shape beyond the prefix (which ``CaptionJob`` keeps).

    Attributes:
        suffix: Text put after every caption, "" for none.
        separator: Put between prefix, caption and suffix (and between an
            existing caption and the new one in append/prepend).
        trigger_word: Replaces ``[trigger]`` in the prefix and suffix; ""
            leaves ``[trigger]`` for ai-toolkit.
        mode: One of ``CAPTION_MODES``, or None to follow the job's older
            ``skip_existing``/``overwrite`` switches.
        extension: The caption file's extension (``.txt`` default).
        manifest: Also write ``metadata.jsonl`` into the folder.
        subfolders: Caption the images and videos in subfolders too.
        cleanup: The ``_caption_cleanup`` rules applied to each answer (all by default).
        include: Glob patterns a folder's file must match (none: every file).
        exclude: Glob patterns that leave a folder's file out.
        limit: Caption at most this many of the folder's files (0: all), in sorted order.
        csv: Also write ``metadata.csv`` (``image_path``, ``caption``) into the folder.
    """

    suffix: str = ""
    separator: str = ", "
    trigger_word: str = ""
    mode: str | None = None
    extension: str = ".txt"
    manifest: bool = False
    subfolders: bool = False
    cleanup: tuple[str, ...] = CLEANUP_RULES
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    limit: int = 0
    csv: bool = False

    def __post_init__(self) -> None:
        """Check every value once, where it enters (node and CLI alike).

        Raises:
            InvalidSettingError: An unknown mode, an extension that is not a
                short ``.name``, a separator that is empty or a newline, or an
                unknown cleanup rule.
        """
        unknown = [rule for rule in self.cleanup if rule not in CLEANUP_RULES]
        if unknown:
            raise InvalidSettingError("caption_cleanup", unknown, " / ".join(CLEANUP_RULES))
        if isinstance(self.limit, bool) or not isinstance(self.limit, int) or self.limit < 0:
            raise InvalidSettingError("max_files", self.limit, "a whole number, 0 for every file")
        if self.mode is not None and self.mode not in CAPTION_MODES:
            raise InvalidSettingError("caption_mode", self.mode, " / ".join(CAPTION_MODES))
        if not _EXTENSION.fullmatch(self.extension):
            raise InvalidSettingError(
                "caption_extension",
                self.extension,
                "a dot and up to 15 letters, digits, - or _ (.txt, .caption, .json)",
            )
        if self.extension.lower() in {".jsonl", ".png", ".jpg", ".jpeg", ".webp", ".mp4"}:
            raise InvalidSettingError(
                "caption_extension", self.extension, "not a media or manifest extension"
            )
        if not self.separator.strip(" ") or "\n" in self.separator:
            raise InvalidSettingError(
                "caption_separator", self.separator, 'a visible separator such as ", " or " "'
            )

    @property
    def selection(self) -> JsonRecord:
        """``find_media``'s selection arguments (include, exclude, at_most)."""
        return {"include": self.include, "exclude": self.exclude, "at_most": self.limit}


def existing_mode(conventions: CaptionConventions, skip_existing: bool, overwrite: bool) -> str:
    """The mode in force: the conventions' own, else the job's older switches.

    Older workflows and callers set ``skip_existing``/``overwrite``; with
    both off an image is captioned again but its file is left alone
    (``"keep"``).
    """
    if conventions.mode is not None:
        return conventions.mode
    if skip_existing:
        return "skip_existing"
    return "overwrite" if overwrite else "keep"


def check_template(field: str, text: str) -> None:
    """Refuse placeholders other than ``{name}``/``{folder}`` before any model work.

    Raises:
        InvalidSettingError: ``text`` names an unknown ``{field}``.
    """
    for match in _FIELD.finditer(text):
        if match.group(1) not in _FIELDS:
            raise InvalidSettingError(
                field,
                text,
                "placeholders {name} (the file's stem), {folder} (its folder's name) and "
                "[trigger] (the trigger word, or left for ai-toolkit)",
            )


def checked_conventions(
    *,
    prefix: tuple[str, str],
    suffix: tuple[str, str],
    disabled_cleanup: Collection[str] = (),
    **fields: Any,
) -> CaptionConventions:
    """The conventions as the node or the CLI gives them, checked where they enter.

    The one place both faces build :class:`CaptionConventions`: the prefix and
    suffix templates are checked under the name the user typed them as, each
    cleanup rule not switched off applies, and the record checks the rest.

    Args:
        prefix: ``(its name, the prefix)``: the prefix stays ``CaptionJob``'s, only checked.
        suffix: ``(its name, the suffix)``.
        disabled_cleanup: The ``CLEANUP_RULES`` switched off.
        fields: The record's other fields.

    Raises:
        InvalidSettingError: An unknown placeholder, or a value the record refuses.
    """
    check_template(*prefix)
    check_template(*suffix)
    cleanup = tuple(rule for rule in CLEANUP_RULES if rule not in disabled_cleanup)
    return CaptionConventions(suffix=suffix[1], cleanup=cleanup, **fields)


def _fill(text: str, trigger_word: str, path: Path | None, name: str) -> str:
    values = {
        "name": path.stem if path is not None else name,
        "folder": path.parent.name if path is not None else "",
    }
    text = _FIELD.sub(lambda match: values[match.group(1)], text)
    word = trigger_word.strip()
    return text.replace("[trigger]", word) if word else text


def join_caption(parts: Sequence[str], separator: str = ", ") -> str:
    """Join caption parts with one separator that never doubles.

    Empty parts drop out. Where a part already ends with the separator's
    mark (or any sentence stop) the next part follows after a space only;
    a part's leading separator mark is dropped.
    """
    mark = separator.strip()
    text = ""
    for raw in parts:
        part = raw.strip()
        if mark:
            part = part.removeprefix(mark).lstrip()
        if not part:
            continue
        if not text:
            text = part
        elif text.endswith(tuple(_TRAILING_STOPS)) or (mark and text.endswith(mark)):
            text = f"{text} {part}"
        else:
            text = f"{text.rstrip()}{separator}{part}" if mark else f"{text} {part}"
    return text


def compose_caption(
    prefix: str, caption: str, conventions: CaptionConventions, path: Path | None, name: str
) -> str:
    """The caption as written: prefix, the model's answer, suffix, templated."""
    fill = conventions.trigger_word, path, name
    return join_caption(
        [_fill(prefix, *fill), caption, _fill(conventions.suffix, *fill)], conventions.separator
    )


def counted_message(done: int, total: int, name: str, record: JsonRecord) -> str:
    """The status after one more image: a failure said as one, a kept file as kept."""
    status = record.get("status")
    if status == "failed":
        return f"{done}/{total} images done; {name} failed (see metadata_json)"
    if status == "kept_existing":
        return f"{done}/{total} images done; {name} kept its caption file"
    return f"Captioned {done}/{total} images ({name})"


def merge_existing(existing: str, caption: str, mode: str, separator: str) -> str:
    """An existing caption and the new one, as ``append``/``prepend`` put them."""
    if mode == "append":
        return join_caption([existing, caption], separator)
    if mode == "prepend":
        return join_caption([caption, existing], separator)
    return caption


def read_caption_file(path: Path) -> str:
    """The caption in an existing file (a ``.json`` sidecar's ``caption``)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix.lower() == ".json":
        try:
            value = json.loads(text)
        except ValueError:
            return text.strip()
        if isinstance(value, dict) and isinstance(value.get("caption"), str):
            return value["caption"].strip()
    return text.strip()


def write_caption_file(path: Path, caption: str, record: JsonRecord, model: str) -> None:
    """Write one caption file atomically (a ``.json`` sidecar with what made it)."""
    if path.suffix.lower() == ".json":
        # a checkpoint folder is named, not its place on this disk
        shown = Path(model).name if Path(model).expanduser().is_absolute() else model
        sidecar = {"caption": caption, "file": path.with_suffix("").name, "model": shown}
        for key in ("output_tokens", "generation_seconds"):
            if record.get(key) is not None:
                sidecar[key] = record[key]
        write_atomically(path, json.dumps(sidecar, ensure_ascii=False, indent=2) + "\n")
    else:
        write_atomically(path, caption + "\n")


def store_caption(
    path: Path, caption: str, record: JsonRecord, *, mode: str, separator: str, model: str
) -> str:
    """Write ``caption`` to ``path`` as ``mode`` says; returns the caption the file holds.

    ``record`` gets ``written`` (and a ``note`` when an existing file is
    left alone, ``merged`` when the new caption joined an existing one).
    """
    if path.exists():
        if mode == "keep":
            record["written"] = False
            record["note"] = "caption file exists; choose overwrite, append or prepend"
            return caption
        if mode in ("append", "prepend"):
            caption = merge_existing(read_caption_file(path), caption, mode, separator)
            record["merged"] = mode
    write_caption_file(path, caption, record, model)
    record["written"] = True
    return caption


def write_manifest(
    folder: Path, entries: Sequence[tuple[Path, str, bool]]
) -> tuple[Path, int] | None:
    """Write ``metadata.jsonl`` into ``folder``: one line per (file, caption, is_video).

    Files without a caption (failed) are left out. Returns the manifest's
    path and line count, or None when no file has a caption.
    """
    lines = []
    root = folder.resolve()
    for path, caption, video in entries:
        if not caption:
            continue
        absolute = path.resolve()
        key = "video_path" if video else "image_path"
        line = {
            key: str(absolute),
            "caption": caption,
            "media_path": absolute.relative_to(root).as_posix(),
        }
        lines.append(json.dumps(line, ensure_ascii=False))
    if not lines:
        return None
    target = folder / MANIFEST_NAME
    write_atomically(target, "\n".join(lines) + "\n")
    return target, len(lines)


def write_csv(folder: Path, entries: Sequence[tuple[Path, str, bool]]) -> tuple[Path, int] | None:
    """Write ``metadata.csv`` into ``folder``: a header, then one row per captioned file.

    Columns ``image_path`` (absolute, as the JSONL manifest's) and
    ``caption``, quoted as RFC 4180 says (a comma, quote or newline inside a
    caption stays in its cell). Returns the file and its row count, or None
    when no file has a caption.
    """
    rows = [(str(path.resolve()), caption) for path, caption, _ in entries if caption]
    if not rows:
        return None
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(("image_path", "caption"))
    writer.writerows(rows)
    target = folder / CSV_NAME
    write_atomically(target, buffer.getvalue())
    return target, len(rows)


def write_batch_manifest(
    conventions: CaptionConventions,
    folder: str | Path | None,
    items: Sequence[Any],
    captions: Sequence[str],
    metadata: JsonRecord,
) -> None:
    """Write the folder's manifest and CSV after a batch when asked; note them in ``metadata``.

    Every folder item with a caption (captioned or kept) gets a line; the
    manifest is named by its file name only (no path of this disk in the
    metadata).
    """
    if not (conventions.manifest or conventions.csv) or not folder:
        return
    entries = [
        (item.path, caption, is_video(item.path))
        for item, caption in zip(items, captions, strict=True)
        if item.path is not None
    ]
    if conventions.manifest:
        written = write_manifest(Path(folder).expanduser(), entries)
        metadata["manifest"] = None if written is None else written[0].name
        metadata["manifest_lines"] = 0 if written is None else written[1]
    if conventions.csv:
        table = write_csv(Path(folder).expanduser(), entries)
        metadata["csv"] = None if table is None else table[0].name
        metadata["csv_rows"] = 0 if table is None else table[1]
