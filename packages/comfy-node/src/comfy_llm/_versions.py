"""Which comfy-llm packages, at which versions, served a run.

Every package carries ``__version__`` (kept equal to its pyproject's version by
``scripts/version.py``), read from the imported module itself rather than from
installed metadata: a registry install loads the packages from its own
``packages/*/src`` and has no metadata, and a module is what actually ran even
when another copy is installed elsewhere. The layers every run passes through
are imported when asked; modal-remote and the engine package, loaded only when a run
needs them, are noted (:func:`note_served`, :func:`note_engine`). No
look into ``sys.modules`` and no import by name: the registry's scan flags both.
"""

from __future__ import annotations

import importlib.metadata
from types import ModuleType

__all__ = ["__version__", "loaded_versions", "note_engine", "note_served"]

__version__ = "0.1.0"
"""comfy-llm's own version (``comfy_llm.__version__``), here so the pipeline can read it."""

_NOTED: dict[str, str] = {}


def _version(module: ModuleType) -> tuple[str, str]:
    return module.__name__.replace("_", "-"), str(getattr(module, "__version__", "unknown"))


def note_served(module: ModuleType) -> None:
    """Record a package loaded for a run (an engine backend, modal-remote)."""
    name, version = _version(module)
    _NOTED[name] = version


def note_engine(engine: str) -> None:
    """Record the engine package a local run loaded (its profile's engine record names it).

    Its version comes from installed metadata; a clone or the registry archive
    has none, and every package in it is at the archive's version, the node's.
    """
    from comfy_llm_profiles import engine_spec

    name = engine_spec(engine).module.replace("_", "-")
    try:
        _NOTED[name] = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        _NOTED[name] = __version__


def loaded_versions() -> dict[str, str]:
    """``{distribution: version}`` of the comfy-llm packages this process has served with.

    What ``metadata_json`` reports as ``comfy_llm_versions``.
    """
    import comfy_llm_core
    import comfy_llm_inputs
    import comfy_llm_profiles
    import comfy_llm_reasoning
    import comfy_llm_residency
    import comfy_llm_staging
    import comfy_llm_structured

    every_run = (
        comfy_llm_core,
        comfy_llm_inputs,
        comfy_llm_profiles,
        comfy_llm_reasoning,
        comfy_llm_residency,
        comfy_llm_staging,
        comfy_llm_structured,
    )
    found = {"comfy-llm": __version__, **dict(_version(module) for module in every_run)}
    found.update(_NOTED)
    return dict(sorted(found.items()))
