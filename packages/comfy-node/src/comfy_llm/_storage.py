"""Where snapshots and manifests live.

Inside ComfyUI the default is ``<ComfyUI models>/modal_llm`` (registered as
the ``modal_llm`` model folder); outside it a per-user cache folder.
``COMFY_MODAL_LOCAL_LLM_STORAGE_ROOT`` and ``--storage-root`` override both.
This is the only module that asks ComfyUI's ``folder_paths`` for anything.
"""

from __future__ import annotations

from pathlib import Path

from comfy_llm_core import env_str
from comfy_llm_staging import default_storage_root

__all__ = [
    "LMSTUDIO_ENV",
    "LMSTUDIO_FOLDER_NAME",
    "lmstudio_models_dir",
    "CHECKPOINT_FOLDER_NAMES",
    "MODEL_FOLDER_NAME",
    "comfy_models_dir",
    "model_folders",
    "installation_dir",
    "register_model_folder",
    "storage_root",
]

MODEL_FOLDER_NAME = "modal_llm"
UNLISTED_EXTENSION = ".comfy-llm-unlisted"
"""The only extension ComfyUI may list in the ``modal_llm`` folder; no file has it.

ComfyUI lists (and its asset scanner hashes) every file of a folder registered
with an empty extension set, so in-progress downloads (``<revision>.partial/``)
would show up as models, and finished multi-GB weights would be hashed for
nothing. The folder stays registered (``extra_model_paths.yaml`` can move it)."""


CHECKPOINT_FOLDER_NAMES = ("LLM", "VLM", MODEL_FOLDER_NAME, "text_encoders")
"""Model folders whose subfolders may be Hugging Face checkpoints or GGUF files:
``models/LLM`` and ``models/VLM`` (where other LLM node packs keep them), our own, and
``models/text_encoders`` (where GGUF loaders keep Qwen-VL and other LLM GGUFs)."""

LMSTUDIO_FOLDER_NAME = "lmstudio"
"""``models/lmstudio/<publisher>/<repository>/<file>.gguf`` names LM Studio's downloads."""
LMSTUDIO_ENV = "COMFY_LLM_LMSTUDIO_MODELS"
"""LM Studio's models folder when it is not where LM Studio puts it by default."""
_LMSTUDIO_DEFAULTS = ("~/.lmstudio/models", "~/.cache/lm-studio/models")  # 0.3+, then older


def lmstudio_models_dir() -> Path | None:
    """LM Studio's models folder: ``COMFY_LLM_LMSTUDIO_MODELS``, else its default places."""
    configured = (env_str(LMSTUDIO_ENV) or "").strip()
    candidates = [configured] if configured else list(_LMSTUDIO_DEFAULTS)
    for candidate in candidates:
        path = Path(candidate).expanduser()
        if path.is_dir():
            return path
    return None


def model_folders() -> dict[str, list[Path]]:
    """The folders ``models/<folder>/<name>`` references look in, by folder name.

    Inside ComfyUI: ``<models>/<name>`` plus whatever ``folder_paths`` has
    registered for that name (``extra_model_paths.yaml`` entries, other
    packs). LM Studio's models folder, when there is one, as ``lmstudio``
    (inside ComfyUI and out); nothing else outside ComfyUI (give an absolute path).
    """
    lmstudio = lmstudio_models_dir()
    found: dict[str, list[Path]] = {LMSTUDIO_FOLDER_NAME: [lmstudio]} if lmstudio else {}
    try:
        import folder_paths
    except ImportError:
        return found
    base = comfy_models_dir()
    for name in CHECKPOINT_FOLDER_NAMES:
        paths: list[Path] = [base / name] if base is not None else []
        registry = getattr(folder_paths, "folder_names_and_paths", {})
        for key in registry if isinstance(registry, dict) else ():
            if isinstance(key, str) and key.lower() == name.lower():
                entry = registry[key]
                if isinstance(entry, tuple) and entry:
                    paths.extend(Path(p) for p in entry[0] if isinstance(p, str))
        unique = list(dict.fromkeys(p.expanduser() for p in paths))
        found[name] = unique
    return found


def comfy_models_dir() -> Path | None:
    """Return ComfyUI's models folder when running inside ComfyUI, else None."""
    try:
        import folder_paths
    except ImportError:
        return None
    models_dir = getattr(folder_paths, "models_dir", None)
    return Path(models_dir) if models_dir else None


def storage_root(explicit: str | Path | None = None) -> Path:
    """Resolve the storage root: explicit, then the environment, then defaults."""
    if explicit:
        return Path(explicit).expanduser().resolve()
    return default_storage_root(comfy_models_dir())


def register_model_folder(root: Path) -> None:
    """Register the storage root with ComfyUI as the ``modal_llm`` model folder.

    A no-op outside ComfyUI. Registering lets ``extra_model_paths.yaml`` users
    see and move where LLM snapshots go; no file in it is listed as a model
    (see :data:`UNLISTED_EXTENSION`).
    """
    try:
        import folder_paths
    except ImportError:
        return
    add = getattr(folder_paths, "add_model_folder_path", None)
    if add is not None:
        add(MODEL_FOLDER_NAME, str(root), is_default=True)
    registry = getattr(folder_paths, "folder_names_and_paths", None)
    if not isinstance(registry, dict):
        return
    entry = registry.get(MODEL_FOLDER_NAME)
    if isinstance(entry, tuple) and len(entry) == 2:  # (paths, extensions)
        registry[MODEL_FOLDER_NAME] = (entry[0], {UNLISTED_EXTENSION})


def installation_dir(root: Path) -> Path:
    """Where this installation's Modal id lives: ComfyUI's user directory, else ``root``."""
    try:
        import folder_paths
    except ImportError:
        return root
    get_user_directory = getattr(folder_paths, "get_user_directory", None)
    return Path(get_user_directory()) if get_user_directory is not None else root


def comfy_input_dir() -> Path | None:
    """ComfyUI's input folder (what Load Image / Load Video list), or None outside ComfyUI."""
    try:
        import folder_paths
    except ImportError:
        return None
    get_input_directory = getattr(folder_paths, "get_input_directory", None)
    return Path(get_input_directory()) if get_input_directory is not None else None
