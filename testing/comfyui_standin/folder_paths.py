"""Stand-in for ComfyUI's ``folder_paths`` (tests only)."""

from __future__ import annotations

import os

base_path = os.environ.get("COMFYUI_STANDIN_BASE", os.getcwd())
models_dir = os.path.join(base_path, "models")
folder_names_and_paths: dict[str, tuple[list[str], set[str]]] = {}


def add_model_folder_path(
    folder_name: str, full_folder_path: str, is_default: bool = False
) -> None:
    paths, exts = folder_names_and_paths.setdefault(folder_name, ([], set()))
    if full_folder_path in paths:
        return
    if is_default:
        paths.insert(0, full_folder_path)
    else:
        paths.append(full_folder_path)


def get_folder_paths(folder_name: str) -> list[str]:
    return list(folder_names_and_paths.get(folder_name, ([], set()))[0])


def get_filename_list(folder_name: str) -> list[str]:
    """Every file under the folder's paths whose extension is listed (any, when none are),
    as ComfyUI 0.33 lists models (and its asset scanner finds them)."""
    paths, extensions = folder_names_and_paths.get(folder_name, ([], set()))
    found = set()
    for base in paths:
        for dirpath, subdirs, filenames in os.walk(base, followlinks=True):
            subdirs[:] = [name for name in subdirs if name != ".git"]
            for name in filenames:
                relative = os.path.relpath(os.path.join(dirpath, name), base)
                if not extensions or os.path.splitext(relative)[-1].lower() in extensions:
                    found.add(relative)
    return sorted(found)
