"""The model picker both nodes share: a list to pick from, any reference still accepted.

ComfyUI refuses a COMBO value missing from its list ("Value not in list",
``execution.py`` ``validate_inputs``) unless the node's ``validate_inputs``
names that input: then the list check is skipped for it alone (min/max and
list checks of the other inputs still run; a ``**kwargs`` signature would
switch them off for every input). So ``model_profile`` is a COMBO of what is
on offer (curated ids, staged snapshots, local folders) whose
``validate_inputs(model_profile)`` accepts any reference that parses — a
seed-era ``owner/model`` saved in a workflow loads and runs — and refuses at
queue time one that cannot (with the parser's reason), or a
``models/<folder>/<name>`` whose folder is missing. A frontend combo cannot
be typed into, so ``custom_model`` (a STRING appended last, empty by default)
takes a typed Hub id or path and wins over the list when set.

``custom_model`` is checked when the node runs, before any model work, not at
queue time: ComfyUI reports a failed ``validate_inputs`` once for *every*
input it names (``execution.py``: one ``custom_validation_failed`` per name),
so naming both would show one bad value as two errors.
"""

from __future__ import annotations

import logging

from comfy_llm_profiles import (
    ProfileError,
    find_local_folder,
    find_local_gguf,
    load_curated_registry,
    parse_reference,
)

from comfy_llm._catalogue import picker_choices
from comfy_llm._storage import model_folders, storage_root
from comfy_llm._targets import detect_target

__all__ = ["chosen_model", "model_choices", "validate_model_inputs"]

logger = logging.getLogger(__name__)


def model_choices(default: str) -> dict[str, str]:
    """The picker's ``{value: label}``, ``default`` first (``_catalogue.picker_choices``).

    Listing trouble never breaks ``/object_info``: the curated ids are listed then.
    """
    try:
        found = {c.value: c.label for c in picker_choices(storage_root(), detect_target())}
    except Exception as error:  # a bad storage or target setting must not hide the node
        logger.warning("comfy-llm: model list limited to curated ids: %s", error)
        found = {entry.id: entry.display_name for entry in load_curated_registry().entries.values()}
    return {default: found.get(default, default), **found}


def chosen_model(model_profile: str, custom_model: str | None) -> str:
    """The reference a run uses: ``custom_model`` when typed, else the picked one.

    Raises:
        ValueError: The typed ``custom_model`` cannot be used (the message says why
            and starts with ``custom_model:``).
    """
    typed = (custom_model or "").strip()
    if not typed:
        return model_profile
    problem = _problem(typed)
    if problem is not None:
        raise ValueError(f"custom_model: {problem}")
    return typed


def validate_model_inputs(model_profile: str) -> bool | str:
    """``True``, or the one line ComfyUI shows when the workflow is queued."""
    problem = _problem(model_profile)
    return True if problem is None else f"model_profile: {problem}"


def _problem(reference: str) -> str | None:
    try:
        parsed = parse_reference(reference)
        if parsed.is_local:
            folders = model_folders()
            if find_local_gguf(parsed, folders) is None:
                find_local_folder(parsed, folders)
    except ProfileError as error:
        return str(error)
    return None
