"""The one rule for file paths that come from the Hugging Face Hub.

A repository's metadata names its files (``siblings[].rfilename``, tree
``path``). Those names are hostile until checked: a name such as
``../../victim/model.safetensors`` or an absolute path to a user's ComfyUI checkpoint
joined onto a local folder points outside it. Every package that turns a Hub
name into a local path or a request asks :func:`hub_path_problem` first; a
name with a problem refuses the whole repository.

Accepted: a relative POSIX path of 1 to :data:`MAX_HUB_PATH_PARTS` components,
each 1 to :data:`MAX_HUB_PATH_COMPONENT_BYTES` UTF-8 bytes, at most
:data:`MAX_HUB_PATH_CHARS` characters overall, with no ``.``/``..``/empty
component, no backslash, no colon (drive letters, Windows streams), no NUL or
other control character.
"""

from __future__ import annotations

__all__ = [
    "MAX_HUB_PATH_CHARS",
    "MAX_HUB_PATH_COMPONENT_BYTES",
    "MAX_HUB_PATH_PARTS",
    "hub_path_problem",
    "quote_untrusted",
]

MAX_HUB_PATH_CHARS = 1024
MAX_HUB_PATH_COMPONENT_BYTES = 255
MAX_HUB_PATH_PARTS = 32
_QUOTE_CHARS = 120


def quote_untrusted(value: object, limit: int = _QUOTE_CHARS) -> str:
    """``value`` quoted for a message: ASCII-escaped (NULs, newlines, escapes) and cut short."""
    text = ascii(value)
    return text if len(text) <= limit else text[: limit - 5] + "...'" + f"({len(text)} chars)"


def hub_path_problem(path: object) -> str | None:
    """Return why ``path`` is not a safe repository-relative file path, or None if it is.

    Args:
        path: A file name as the Hub (or a mirror) sent it.

    Returns:
        A short phrase ("is absolute", "contains '..'", ...) fit to follow the
        quoted path in a message, or None.
    """
    if not isinstance(path, str):
        return f"is a {type(path).__name__}, not a string"
    if not path:
        return "is empty"
    if len(path) > MAX_HUB_PATH_CHARS:
        return f"is {len(path)} characters long, over the {MAX_HUB_PATH_CHARS} limit"
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in path):
        return "contains a NUL or another control character"
    if "\\" in path:
        return "contains a backslash"
    if ":" in path:
        return "contains a colon (a drive letter or stream name)"
    if path.startswith("/"):
        return "is absolute"
    parts = path.split("/")
    if len(parts) > MAX_HUB_PATH_PARTS:
        return f"has {len(parts)} components, over the {MAX_HUB_PATH_PARTS} limit"
    for part in parts:
        if part == "..":
            return "contains '..'"
        if part in ("", "."):
            return "contains an empty or '.' component"
        try:
            size = len(part.encode("utf-8"))
        except UnicodeEncodeError:
            return "is not valid Unicode (a lone surrogate)"
        if size > MAX_HUB_PATH_COMPONENT_BYTES:
            return (
                f"has a component of {size} bytes, over the "
                f"{MAX_HUB_PATH_COMPONENT_BYTES} byte limit"
            )
    return None
