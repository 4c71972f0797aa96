"""Every error class of every package crosses a process boundary intact and says what to do.

The classes are found, not listed: each package's ``errors`` module (and
core's own classes) is imported and walked, each class is built with sample
arguments derived from its ``__init__`` signature, pickled and compared.
"""

from __future__ import annotations

import collections
import collections.abc
import importlib
import inspect
import json
import pickle
import subprocess
import sys
import types
import typing
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_core import ComfyLLMError, ErrorAction

REPO_ROOT = Path(__file__).resolve().parents[1]


def _module_names() -> list[str]:
    names = []
    for package in sorted((REPO_ROOT / "packages").iterdir()):
        for source in sorted((package / "src").glob("*/__init__.py")):
            names.append(source.parent.name)
    return names


def _error_modules() -> list[types.ModuleType]:
    modules = [importlib.import_module("comfy_llm_core")]
    for name in _module_names():
        if any((REPO_ROOT / "packages").glob(f"*/src/{name}/errors.py")):
            modules.append(importlib.import_module(f"{name}.errors"))
    return modules


def _error_classes() -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for module in _error_modules():
        prefix = module.__name__.split(".")[0]
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and value.__module__.split(".")[0] == prefix
            ):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return [found[key] for key in sorted(found)]


CLASSES = _error_classes()
IDS = [f"{c.__module__}.{c.__qualname__}" for c in CLASSES]


def _sample(name: str, annotation: Any) -> Any:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return _sample(name, next(a for a in args if a is not type(None)))
    if annotation is bool:
        return True
    if annotation is int:
        return 7
    if annotation is float:
        return 2.5
    if annotation is str:
        return f"sample-{name}"
    if annotation in (object, Any):
        return f"value-of-{name}"
    if annotation is Path:
        return Path("models") / name
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return (_sample(name, args[0]), _sample(name + "2", args[0]))
        return tuple(_sample(f"{name}{i}", a) for i, a in enumerate(args))
    if origin in (list, collections.abc.Sequence):
        return [_sample(name, args[0]), _sample(name + "2", args[0])]
    if origin in (dict, collections.abc.Mapping):
        return {"pid": 7, "host": f"sample-{name}"}
    raise TypeError(f"no sample value for {name}: {annotation!r}; teach _sample this type")


def _build(cls: type[BaseException]) -> BaseException:
    if not any("__init__" in vars(k) for k in cls.__mro__ if k.__module__ != "builtins"):
        return cls(f"sample message of {cls.__name__}")
    init = cls.__init__
    hints = typing.get_type_hints(init)
    positional: list[Any] = []
    keywords: dict[str, Any] = {}
    for parameter in list(inspect.signature(init).parameters.values())[1:]:
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        value = _sample(parameter.name, hints.get(parameter.name, str))
        if parameter.kind is parameter.KEYWORD_ONLY:
            keywords[parameter.name] = value
        else:
            positional.append(value)
    return cls(*positional, **keywords)


def _facts(error: BaseException) -> dict[str, Any]:
    facts = {
        "type": type(error),
        "message": str(error),
        "args": error.args,
        "attributes": dict(vars(error)),
        "action": getattr(error, "action", None),
    }
    if isinstance(error, ImportError):
        facts["import"] = (error.name, error.path)
    return facts


def test_the_walk_finds_every_package() -> None:
    walked = {cls.__module__.split(".")[0] for cls in CLASSES}
    with_errors = {path.parent.name for path in (REPO_ROOT / "packages").glob("*/src/*/errors.py")}
    for name in sorted(with_errors - walked):
        # An errors module may hold only shared classes (backend-mlx re-exports the backend
        # vocabulary of residency): each is then one the walk found elsewhere.
        exported = [
            value
            for value in vars(importlib.import_module(f"{name}.errors")).values()
            if isinstance(value, type) and issubclass(value, BaseException)
        ]
        assert exported and all(cls in CLASSES for cls in exported), name
    assert "comfy_llm_core" in walked
    assert len(CLASSES) >= 60


@pytest.mark.parametrize("cls", CLASSES, ids=IDS)
def test_error_derives_from_the_core_base(cls: type[BaseException]) -> None:
    assert issubclass(cls, ComfyLLMError)


@pytest.mark.parametrize("cls", CLASSES, ids=IDS)
def test_error_round_trips_through_pickle(cls: type[BaseException]) -> None:
    error = _build(cls)
    copy = pickle.loads(pickle.dumps(error))
    assert _facts(copy) == _facts(error)
    assert str(copy)  # a message a person can read


@pytest.mark.parametrize("cls", CLASSES, ids=IDS)
def test_every_class_has_an_action(cls: type[BaseException]) -> None:
    assert isinstance(getattr(cls, "action", None), ErrorAction)


def _inherited_action(cls: type[BaseException]) -> ErrorAction | None:
    return next((vars(k)["action"] for k in cls.__mro__[1:] if "action" in vars(k)), None)


RESTATED_ACTION_ALLOWED = {
    # Allowed since 2026-12, until llama.cpp joins the shared backend vocabulary in
    # residency (issue 30): backend-llamacpp's own errors restate their base's action.
    "comfy_llm_backend_llamacpp",
}


def test_action_is_set_only_where_it_differs_from_the_inherited_one() -> None:
    """A class inherits ``action``; one that sets it says something its base does not."""
    restated = {
        f"{cls.__module__}.{cls.__qualname__}"
        for cls in CLASSES
        if "action" in vars(cls) and vars(cls)["action"] == _inherited_action(cls)
    }
    assert {name for name in restated if name.split(".")[0] not in RESTATED_ACTION_ALLOWED} == set()
    still = {name.split(".")[0] for name in restated}
    assert still >= RESTATED_ACTION_ALLOWED, "an allowance is no longer needed: delete it"


SHARED_NAMES_ALLOWED = {
    # Allowed since 2026-12: backend-llamacpp's prompt-length error is its own (the
    # shared vocabulary has none yet), and backend-cuda's quantization refusal is named
    # like profiles'.
    "PromptTooLongError",
    "UnsupportedQuantizationError",
}


def test_one_name_means_one_class() -> None:
    """Catching a class by name catches what its name says (the node's base was once
    a second ``ComfyLLMError`` that missed every other package's errors)."""
    names = collections.Counter(cls.__qualname__ for cls in CLASSES)
    shared = {name for name, count in names.items() if count > 1}
    assert shared - SHARED_NAMES_ALLOWED == set()
    assert shared >= SHARED_NAMES_ALLOWED, "an allowance is no longer needed: delete it"


def test_errors_unpickle_in_a_fresh_interpreter() -> None:
    errors = [_build(cls) for cls in CLASSES]
    code = (
        "import json, pickle, sys\n"
        "errors = pickle.loads(sys.stdin.buffer.read())\n"
        "print(json.dumps([[type(e).__module__ + '.' + type(e).__qualname__, str(e), "
        "str(e.action)] for e in errors]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        input=pickle.dumps(errors),
        capture_output=True,
        check=True,
        timeout=120,
    )
    expected = [[i, str(e), str(_action(e))] for i, e in zip(IDS, errors, strict=True)]
    assert json.loads(done.stdout) == expected


def _action(error: BaseException) -> ErrorAction:
    action = getattr(error, "action", None)
    assert isinstance(action, ErrorAction)
    return action


def test_what_the_caller_should_do() -> None:
    from comfy_llm_core import InvalidSettingError
    from comfy_llm_profiles.errors import (
        HubAccessError,
        HubTimeoutError,
        HubUnavailableError,
        ManifestError,
        UnsupportedArchitectureError,
    )
    from comfy_llm_staging.errors import (
        InsufficientDiskSpaceError,
        StagingLeaseTimeoutError,
    )

    assert _action(InvalidSettingError("X", "y", "a number")) is ErrorAction.FIX_INPUT
    assert _action(_build(UnsupportedArchitectureError)) is ErrorAction.FIX_INPUT
    assert _action(_build(HubAccessError)) is ErrorAction.FIX_INPUT
    assert _action(_build(HubUnavailableError)) is ErrorAction.RETRY
    assert _action(_build(HubTimeoutError)) is ErrorAction.RETRY
    assert _action(_build(StagingLeaseTimeoutError)) is ErrorAction.RETRY
    # a full disk is not an input to fix: the same request works once there is room
    assert _action(_build(InsufficientDiskSpaceError)) is ErrorAction.RETRY
    assert _action(_build(ManifestError)) is ErrorAction.FATAL


def test_memory_refusal_is_fatal_only_when_the_worker_became_unsafe() -> None:
    from comfy_llm_residency.errors import InsufficientMemoryError

    facts: dict[str, Any] = {
        "profile_id": "hf-x",
        "repository": "o/m",
        "needed_bytes": 8,
        "reserve_bytes": 2,
        "available_bytes": 1,
        "total_bytes": 16,
        "device": "cuda:0",
        "reserve_name": "reserve_free_vram_gb",
    }
    refused = InsufficientMemoryError(**facts)
    unsafe = InsufficientMemoryError(**facts, evicted_profiles=("hf-y",), recovery_timed_out=True)
    assert _action(refused) is ErrorAction.FIX_INPUT
    assert _action(unsafe) is ErrorAction.FATAL
    assert _action(pickle.loads(pickle.dumps(unsafe))) is ErrorAction.FATAL
