"""File inputs (ComfyUI ``OPENAI_INPUT_FILES``, mappings, paths) to bounded text.

Supported: UTF-8 text types (:data:`TEXT_MIME_TYPES`) and PDFs. Sizes are
checked from the encoded length before anything is decoded, then exactly;
characters are counted as text is extracted.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import functools
import os
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any

from comfy_llm_core import FileLimits

from ._limits import ProgressCallback, report
from ._paths import open_regular_file
from ._pdf import extract_pdf_text
from .errors import FileInputError

PDF_MIME_TYPE = "application/pdf"

TEXT_MIME_TYPES: frozenset[str] = frozenset(
    {
        "text/plain",
        "text/markdown",
        "text/x-markdown",
        "text/csv",
        "text/tab-separated-values",
        "text/html",
        "text/xml",
        "text/x-rst",
        "text/x-python",
        "text/yaml",
        "text/x-yaml",
        "application/json",
        "application/x-ndjson",
        "application/jsonl",
        "application/xml",
        "application/yaml",
        "application/x-yaml",
        "application/toml",
    }
)
"""MIME types read as UTF-8 text."""

EXTENSION_MIME_TYPES: Mapping[str, str] = {
    ".txt": "text/plain",
    ".text": "text/plain",
    ".log": "text/plain",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".csv": "text/csv",
    ".tsv": "text/tab-separated-values",
    ".html": "text/html",
    ".htm": "text/html",
    ".xml": "application/xml",
    ".rst": "text/x-rst",
    ".py": "text/x-python",
    ".json": "application/json",
    ".jsonl": "application/jsonl",
    ".ndjson": "application/x-ndjson",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
    ".toml": "application/toml",
    ".pdf": PDF_MIME_TYPE,
}
"""File extensions understood when the MIME type is missing or generic."""

_GENERIC_TYPES = ("", "application/octet-stream", "binary/octet-stream")
_UTF8_CHARSETS = ("utf-8", "utf8", "us-ascii", "ascii")
_HEADER_SEARCH = 1024  # a data URI's header ends within this many characters


@dataclasses.dataclass(frozen=True)
class ExtractedFile:
    """The text of one file input.

    Attributes:
        name: The file's name as given, without directories.
        mime_type: The type it was read as.
        text: Its text (PDF pages follow ``[page N]`` lines).
        size_bytes: Its size in bytes before extraction.
        page_count: Pages, for PDFs; ``None`` for text.
    """

    name: str
    mime_type: str
    text: str
    size_bytes: int
    page_count: int | None = None


class _Budget:
    """Running totals against the request's limits."""

    def __init__(self, limits: FileLimits) -> None:
        self.limits = limits
        self.bytes = 0
        self.characters = 0

    def check_bytes(self, name: str, size: int, *, estimated: bool) -> None:
        limits = self.limits
        about = "about " if estimated else ""
        if size > limits.max_file_bytes:
            raise FileInputError(
                f"File {name!r} is {about}{size:,} bytes; the limit is "
                f"{limits.max_file_bytes:,} bytes per file; attach a smaller file or only "
                "the part you need",
                filename=name,
                value=size,
                limit=limits.max_file_bytes,
            )
        if self.bytes + size > limits.max_total_file_bytes:
            raise FileInputError(
                f"File {name!r} ({about}{size:,} bytes) brings the request's files to "
                f"{self.bytes + size:,} bytes; the limit is {limits.max_total_file_bytes:,} "
                "bytes in total; attach fewer or smaller files",
                filename=name,
                value=self.bytes + size,
                limit=limits.max_total_file_bytes,
            )

    def check_characters(self, name: str, count: int) -> None:
        limits = self.limits
        if count > limits.max_file_characters:
            raise FileInputError(
                f"File {name!r} has at least {count:,} characters of text (reading stopped "
                f"there); at most {limits.max_file_characters:,} are allowed per file; "
                "shorten or split it, or attach only the part you need",
                filename=name,
                value=count,
                limit=limits.max_file_characters,
            )
        if self.characters + count > limits.max_total_characters:
            raise FileInputError(
                f"File {name!r} brings the request's file text to more than "
                f"{limits.max_total_characters:,} characters (the total limit; "
                f"{self.characters + count:,} so far); attach fewer or shorter files",
                filename=name,
                value=self.characters + count,
                limit=limits.max_total_characters,
            )


def _field(item: Any, key: str) -> Any:
    if isinstance(item, Mapping):
        return item.get(key)
    return getattr(item, key, None)


def _type_for(name: str, declared: str) -> str:
    """The declared MIME type, or the extension's when none or a generic one."""
    declared = declared.strip().lower()
    if declared in _GENERIC_TYPES:
        return EXTENSION_MIME_TYPES.get(os.path.splitext(name)[1].lower(), declared)
    return declared


def _decode_data_uri(name: str, uri: str, budget: _Budget) -> tuple[str, bytes]:
    """Return ``(mime type, bytes)`` of a ``data:`` URI, size-checked first."""
    comma = uri.find(",", 0, _HEADER_SEARCH)
    if not uri[:5].lower() == "data:" or comma < 0:
        raise FileInputError(
            f"File {name!r}: file_data is not a data URI (expected "
            "'data:<type>;base64,<content>'); attach the file with the OpenAI Input Files node",
            filename=name,
        )
    header = uri[5:comma].split(";")
    params = [part.strip().lower() for part in header[1:]]
    is_base64 = "base64" in params
    for param in params:
        if param.startswith("charset=") and param[8:].strip("\"'") not in _UTF8_CHARSETS:
            raise FileInputError(
                f"File {name!r} declares {param!r}; only UTF-8 text is supported; save it "
                "as UTF-8 and attach it again",
                filename=name,
            )
    payload = uri[comma + 1 :]
    estimate = len(payload) * 3 // 4 if is_base64 else len(payload)
    budget.check_bytes(name, estimate, estimated=True)
    if not is_base64:
        return header[0], urllib.parse.unquote_to_bytes(payload)
    if any(ch in payload for ch in " \r\n\t"):
        payload = "".join(payload.split())
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as error:
        raise FileInputError(
            f"File {name!r}: file_data is not valid base64 ({error}); re-attach the file",
            filename=name,
        ) from error
    return header[0], data


def _load(item: Any, position: int, budget: _Budget) -> tuple[str, str, bytes]:
    """Return ``(name, mime type, bytes)`` for one file input."""
    if isinstance(item, (str, os.PathLike)):
        path = os.fspath(item)
        name = os.path.basename(path.rstrip("/" + os.sep)) or path
        handle, size = open_regular_file(
            path, lambda problem: FileInputError(f"File {name!r} {problem}", filename=name)
        )
        with handle:
            budget.check_bytes(name, size, estimated=False)
            data = handle.read(budget.limits.max_file_bytes + 1)
        return name, _type_for(name, ""), data
    raw_name = _field(item, "filename")
    name = os.path.basename(str(raw_name)) if raw_name else f"file {position + 1}"
    file_data = _field(item, "file_data")
    if not isinstance(file_data, str) or not file_data:
        file_id = _field(item, "file_id")
        if file_id:
            raise FileInputError(
                f"File {name!r} refers to an uploaded file id ({file_id!r}) that cannot be "
                "fetched here; attach the file's content (file_data) instead",
                filename=name,
            )
        raise FileInputError(
            f"File input {name!r} ({type(item).__name__}) has no file_data; pass objects "
            "with filename and a data: URI in file_data, mappings with the same keys, or "
            "file paths",
            filename=name,
        )
    declared, data = _decode_data_uri(name, file_data, budget)
    return name, _type_for(name, declared), data


def _as_items(files: Any) -> list[Any]:
    if files is None:
        return []
    if isinstance(files, (str, os.PathLike, Mapping)) or _field(files, "file_data") is not None:
        return [files]
    if isinstance(files, Iterable):
        return list(files)
    raise FileInputError(
        f"Files input of type {type(files).__name__} is not supported; connect an "
        "OPENAI_INPUT_FILES output or pass a list of file paths"
    )


def read_input_files(
    files: Any,
    *,
    limits: FileLimits | None = None,
    progress: ProgressCallback | None = None,
) -> tuple[ExtractedFile, ...]:
    """Read file inputs into bounded UTF-8 text.

    Accepts ComfyUI's ``OPENAI_INPUT_FILES`` value (a list of objects with
    ``filename``, ``file_data`` as a ``data:<mime>;base64,...`` URI,
    ``file_id`` and ``type``), mappings with the same keys, plain paths, or
    one of these alone. Text types are decoded as strict UTF-8 (a BOM is
    dropped, CRLF becomes LF); PDFs go through pypdf.

    Args:
        files: The files value, or ``None``.
        limits: Byte, character and page bounds.
        progress: Optional ``progress(message, done, total)`` callback.

    Returns:
        One :class:`ExtractedFile` per input, in order.

    Raises:
        FileInputError: A file is missing, too large (per file or in total,
            checked before decoding), not a data URI, invalid base64, of an
            unsupported type, not UTF-8, over a character limit, or a PDF
            that is encrypted, unreadable, over the page limit or has no
            text. The message names the file.
    """
    limits = limits or FileLimits()
    items = _as_items(files)
    budget = _Budget(limits)
    extracted: list[ExtractedFile] = []
    for position, item in enumerate(items):
        name, mime_type, data = _load(item, position, budget)
        budget.check_bytes(name, len(data), estimated=False)
        if mime_type == PDF_MIME_TYPE:
            text, pages = extract_pdf_text(
                data,
                name=name,
                max_pages=limits.max_pdf_pages,
                check_characters=functools.partial(budget.check_characters, name),
                progress=progress,
            )
        elif mime_type in TEXT_MIME_TYPES:
            text, pages = _decode_text(name, data), None
            budget.check_characters(name, len(text))
        else:
            supported = ", ".join(sorted(EXTENSION_MIME_TYPES))
            raise FileInputError(
                f"File {name!r} has unsupported type {mime_type or 'unknown'!r}; supported "
                f"are UTF-8 text and PDF ({supported}); convert it to one of these",
                filename=name,
            )
        budget.bytes += len(data)
        budget.characters += len(text)
        extracted.append(ExtractedFile(name, mime_type, text, len(data), pages))
        report(progress, "Reading files", position + 1, len(items))
    return tuple(extracted)


def _decode_text(name: str, data: bytes) -> str:
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise FileInputError(
            f"File {name!r} is not valid UTF-8 text (byte 0x{data[error.start]:02x} at "
            f"offset {error.start}); save it as UTF-8 and attach it again",
            filename=name,
        ) from error
    return text.replace("\r\n", "\n")
