"""Prompt assembly: the user prompt, the video timestamps, labelled file sections.

Each file becomes one section::

    <file-1a2b3c4d name="notes &quot;v2&quot;.txt" type="text/plain">
    ...the file's text, unchanged...
    </file-1a2b3c4d>

The tag carries a marker derived from a SHA-256 of the file's name and
text, re-derived until neither ``<file-MARKER`` nor ``</file-MARKER`` occurs
in the text, so a file's content can never close (or fake) its own section
and the text is passed through unmodified. The name is an XML attribute
value: control and format characters are dropped, ``& < > " '`` escaped and
the length capped, so a name cannot break out of the tag either. The
marker is deterministic: the same inputs give the same prompt.
"""

from __future__ import annotations

import hashlib
import html
import unicodedata
from collections.abc import Iterable, Sequence

from ._files import ExtractedFile

MAX_NAME_CHARACTERS = 200


def clean_file_name(name: str) -> str:
    """Return ``name`` safe for an attribute value (escaped, one line, capped).

    Args:
        name: A file name as the user gave it.

    Returns:
        The escaped name; ``"unnamed"`` when nothing printable is left.
    """
    kept = "".join(
        " " if char in "\t\n\r" else char
        for char in name
        if char in "\t\n\r" or unicodedata.category(char) not in ("Cc", "Cf", "Cs")
    ).strip()
    if len(kept) > MAX_NAME_CHARACTERS:
        kept = kept[: MAX_NAME_CHARACTERS - 1] + "\u2026"
    return html.escape(kept or "unnamed", quote=True)


def section_marker(name: str, text: str) -> str:
    """Return a marker whose open/close tags do not occur in ``text``.

    Args:
        name: The file's name.
        text: The file's text.

    Returns:
        Eight lowercase hex digits.
    """
    digest = hashlib.sha256(f"{name}\0{text}".encode("utf-8", "surrogatepass")).hexdigest()
    while True:
        marker = digest[:8]
        if f"<file-{marker}" not in text and f"</file-{marker}" not in text:
            return marker
        digest = hashlib.sha256(digest.encode("ascii")).hexdigest()


def file_section(file: ExtractedFile) -> str:
    """Render one file as a labelled section.

    Args:
        file: The extracted file.

    Returns:
        The section, without a trailing newline.
    """
    marker = section_marker(file.name, file.text)
    attributes = f'name="{clean_file_name(file.name)}" type="{html.escape(file.mime_type)}"'
    if file.page_count is not None:
        attributes += f' pages="{file.page_count}"'
    return f"<file-{marker} {attributes}>\n{file.text}\n</file-{marker}>"


def video_line(timestamps: Sequence[float]) -> str:
    """Describe the sampled video frames and when each is from.

    Args:
        timestamps: Seconds from the start of the video, one per frame.

    Returns:
        One line, e.g. ``"Video: 3 frames, in order, at 0.00s, 1.50s, 3.00s."``.
    """
    plural = "frame" if len(timestamps) == 1 else "frames, in order,"
    stamps = ", ".join(f"{seconds:.2f}s" for seconds in timestamps)
    return f"Video: {len(timestamps)} {plural} at {stamps} from the start."


def assemble_prompt(
    prompt: str,
    *,
    video_timestamps: Sequence[float] = (),
    files: Iterable[ExtractedFile] = (),
) -> str:
    """Join the user prompt, the video line and the file sections.

    Parts are separated by a blank line; empty parts are left out.

    Args:
        prompt: The user's prompt.
        video_timestamps: Sampled frame times, empty without a video.
        files: Extracted files, in order.

    Returns:
        The assembled prompt text.
    """
    parts = [prompt.strip("\n")] if prompt.strip() else []
    if video_timestamps:
        parts.append(video_line(video_timestamps))
    parts.extend(file_section(file) for file in files)
    return "\n\n".join(parts)
