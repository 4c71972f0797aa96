"""One Modal app per ComfyUI installation, named from a persisted random id.

The id is created once, written atomically (a complete temporary file is
hard-linked into place, which fails if the name exists, so two ComfyUI
processes starting together agree on whichever link lands first)
into ComfyUI's user directory, or the storage root outside ComfyUI.
``COMFY_MODAL_APP_NAME`` overrides the derived name.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

from ..wire._settings import ModalSettings

__all__ = ["APP_NAME_PREFIX", "ID_FILENAME", "app_name", "installation_id"]

ID_FILENAME = "comfy-llm-modal-installation-id"
APP_NAME_PREFIX = "comfy-llm-"
_ID = re.compile(r"^[0-9a-f]{16}$")


def installation_id(directory: Path) -> str:
    """Return this installation's id, creating and persisting it on first use.

    Args:
        directory: ComfyUI's user directory (or the storage root).

    Returns:
        16 lowercase hex characters, the same on every later call.
    """
    path = Path(directory) / ID_FILENAME
    existing = _read(path)
    if existing:
        return existing
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{ID_FILENAME}.{os.getpid()}.{secrets.token_hex(4)}")
    temporary.write_text(secrets.token_hex(8) + "\n", encoding="ascii")
    try:
        os.link(temporary, path)
    except FileExistsError:
        pass
    finally:
        temporary.unlink(missing_ok=True)
    value = _read(path)
    if value is None:
        raise RuntimeError(f"{path} does not hold a valid installation id; delete it to start anew")
    return value


def _read(path: Path) -> str | None:
    try:
        value = path.read_text(encoding="ascii").strip()
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    return value if _ID.match(value) else None


def app_name(directory: Path, settings: ModalSettings | None = None) -> str:
    """The Modal app name: ``COMFY_MODAL_APP_NAME``, else ``comfy-llm-<id>``."""
    settings = settings or ModalSettings.from_env()
    if settings.app_name:
        return settings.app_name
    return APP_NAME_PREFIX + installation_id(directory)
