"""What every backend package must export and how its backends speak: one check for all.

A backend package is named by ``EngineSpec.module`` and loaded by name by
``comfy_llm_residency.create_backend``, so nothing but this check notices a
package that drifts into its own words. It is what the repository's
vocabulary test runs over the engine table, and what the fake-engine test
runs over the fake package.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from types import ModuleType

__all__ = ["SHARED_ERRORS", "VOCABULARY", "backend_classes", "vocabulary_problems"]

SHARED_ERRORS = (
    "BackendUnloadedError",
    "EngineNotInstalledError",
    "ModelLoadError",
    "UnsupportedBackendError",
)
"""The backend errors every package re-exports: the same classes, from residency."""

VOCABULARY = ("ENGINE_NAMES", "create_backend", *SHARED_ERRORS)
"""The names every backend package exports."""

_BACKEND_METHODS = ("generate", "unload", "runtime_metadata")


def backend_classes(package: ModuleType) -> list[type]:
    """The backend classes a package defines (the classes with the Backend methods)."""
    modules = [package]
    if hasattr(package, "__path__"):
        prefix = package.__name__ + "."
        modules += [
            importlib.import_module(info.name)
            for info in pkgutil.walk_packages(package.__path__, prefix)
        ]
    return [
        value
        for module in modules
        for value in vars(module).values()
        if inspect.isclass(value)
        and value.__module__ == module.__name__
        and all(callable(getattr(value, name, None)) for name in _BACKEND_METHODS)
    ]


def vocabulary_problems(module_name: str, engines: tuple[str, ...]) -> list[str]:
    """Everything in which the backend package ``module_name`` departs from the vocabulary.

    Args:
        module_name: The package an engine record names (``EngineSpec.module``).
        engines: The engine records naming it, in table order.

    Returns:
        One line per problem; empty when the package speaks the shared words.
    """
    import comfy_llm_residency

    package = importlib.import_module(module_name)
    exported = set(getattr(package, "__all__", ()))
    problems = [
        f"{module_name} does not export {name}" for name in VOCABULARY if name not in exported
    ]
    for name in SHARED_ERRORS:
        if getattr(package, name, None) is not getattr(comfy_llm_residency, name):
            problems.append(f"{module_name}.{name} is not comfy_llm_residency's {name}")
    if tuple(getattr(package, "ENGINE_NAMES", ())) != engines:
        problems.append(f"{module_name}.ENGINE_NAMES is not {engines} (the engine table's)")
    factory = getattr(package, "create_backend", None)
    if factory is not None:
        parameters = list(inspect.signature(factory).parameters)
        if parameters != ["profile", "snapshot_path", "progress"]:
            problems.append(f"{module_name}.create_backend takes {parameters}")
    served = set()
    for cls in backend_classes(package):
        name = cls.__qualname__
        engine = vars(cls).get("ENGINE_NAME")
        if engine not in engines:
            problems.append(f"{name}.ENGINE_NAME is {engine!r}, not one of {engines}")
        served.add(engine)
        if not isinstance(inspect.getattr_static(cls, "loaded", None), property):
            problems.append(f"{name} has no 'loaded' property")
        for old in ("is_loaded", "BACKEND_NAME"):
            if hasattr(cls, old):
                problems.append(f"{name} still says {old!r}")
    problems += [
        f"{module_name} has no backend class for {e!r}" for e in engines if e not in served
    ]
    return problems
