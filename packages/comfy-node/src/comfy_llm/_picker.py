"""The model picker both nodes share: a list to pick from, any reference still accepted.

ComfyUI refuses a COMBO value missing from its list ("Value not in list",
``execution.py`` ``validate_inputs``) unless the node's ``validate_inputs``
names that input: then the list check is skipped for it alone (min/max and
list checks of the other inputs still run; a ``**kwargs`` signature would
switch them off for every input). So ``model_profile`` is a COMBO of what is
on offer (curated ids, staged snapshots, local folders) whose
``validate_inputs(model_profile, custom_model)`` accepts any reference that
parses — a seed-era ``owner/model`` saved in a workflow loads and runs — and
refuses at queue time one that cannot (with the parser's reason), or a
``models/<folder>/<name>`` whose folder is missing. A frontend combo cannot
be typed into, so ``custom_model`` (a STRING appended last, empty by default)
takes a typed Hub id or path and wins over the list when set.
"""

from __future__ import annotations

import logging

from comfy_llm_profiles import ProfileError, find_local_folder, find_local_gguf, parse_reference

from comfy_llm._storage import model_folders, storage_root

__all__ = ["chosen_model", "model_options", "validate_model_inputs"]

logger = logging.getLogger(__name__)


def model_options(default: str) -> list[str]:
    """The picker's list, ``default`` first; listing trouble never breaks ``/object_info``."""
    from comfy_llm._catalogue import picker_values

    try:
        values = picker_values(storage_root())
    except Exception as error:  # a bad storage setting must not hide the node
        logger.warning("comfy-llm: model list limited to curated ids: %s", error)
        from comfy_llm_profiles import load_curated_registry

        values = list(load_curated_registry().ids)
    return list(dict.fromkeys([default, *values]))


def chosen_model(model_profile: str, custom_model: str | None) -> str:
    """The reference a run uses: ``custom_model`` when typed, else the picked one."""
    typed = (custom_model or "").strip()
    return typed or model_profile


def validate_model_inputs(model_profile: str, custom_model: str | None = None) -> bool | str:
    """``True``, or the one line ComfyUI shows when the workflow is queued."""
    reference = chosen_model(model_profile, custom_model)
    field = "custom_model" if (custom_model or "").strip() else "model_profile"
    try:
        parsed = parse_reference(reference)
        if parsed.is_local:
            folders = model_folders()
            if find_local_gguf(parsed, folders) is None:
                find_local_folder(parsed, folders)
    except ProfileError as error:
        return f"{field}: {error}"
    return True
