"""Environment variables, read one way for every package.

Values are read at call time (never at import) so tests and long-lived
ComfyUI processes see the current environment. A bad value raises
:class:`InvalidSettingError` naming the variable, the value and what is
expected; an empty or unset variable means "use the default".
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
from collections.abc import Collection, Iterable, Iterator, Mapping

from comfy_llm_core._errors import ComfyLLMError, ErrorAction

__all__ = [
    "env_scope",
    "InvalidSettingError",
    "env_choice",
    "env_float",
    "env_int",
    "env_set",
    "env_str",
]


class InvalidSettingError(ComfyLLMError, ValueError):
    """An environment variable (or an argument standing in for one) is invalid.

    Attributes:
        name: The variable or argument.
        value: The value given.
        expected: What would be accepted.
    """

    action = ErrorAction.FIX_INPUT

    def __init__(self, name: str, value: object, expected: str) -> None:
        self.name = name
        self.value = value
        self.expected = expected
        super().__init__(f"{name}={value!r} is invalid: expected {expected}.")


def env_str(name: str, default: str | None = None) -> str | None:
    """The stripped value of ``name``, or ``default`` when unset or blank."""
    raw = os.environ.get(name, "").strip()
    return raw or default


def env_set(name: str, value: str, *, overwrite: bool = True) -> str:
    """Set ``name`` for this process and the processes it starts; return the value in force.

    With ``overwrite=False`` a value already set (non-blank) is kept.
    """
    current = env_str(name)
    if current is not None and not overwrite:
        return current
    os.environ[name] = value
    return value


_SCOPE_LOCK = threading.Lock()


@contextlib.contextmanager
def env_scope(changes: Mapping[str, str | None]) -> Iterator[None]:
    """Set (``str``) or remove (``None``) variables for the block; then restore all of them.

    For a child process that must inherit values this process must not keep
    (vLLM's engine core): after the block ``os.environ`` is what it was
    before it, variable for variable. That includes what code inside the
    block wrote: vLLM writes its own settings into ``os.environ`` while it is
    imported (vllm/env_override.py: ``TORCHINDUCTOR_COMPILE_THREADS=1``, which
    would slow every later torch.compile of the host) and while it builds an
    engine's config (platforms/cpu.py ``check_and_update_config``: ``LD_PRELOAD``,
    ``NUMEXPR_MAX_THREADS`` and others; config/vllm.py: a model-dependent
    ``VLLM_USE_BREAKABLE_CUDAGRAPH`` that the next engine would read as the
    user's choice). The engine process has inherited them by the time the
    block ends. Scopes do not nest across threads (one lock); a variable
    another thread writes during the block is restored too.
    """
    with _SCOPE_LOCK:
        saved = dict(os.environ)
        try:
            for name, value in changes.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
            yield
        finally:
            _restore(saved)


def env_snapshot() -> dict[str, str]:
    """A copy of the environment now, for :func:`env_changed` and :func:`env_restore`."""
    return dict(os.environ)


def env_changed(before: Mapping[str, str]) -> list[str]:
    """The variables set, changed or removed since ``before`` (an :func:`env_snapshot`)."""
    current = dict(os.environ)
    return [n for n in before.keys() | current.keys() if before.get(n) != current.get(n)]


def env_restore(before: Mapping[str, str], names: Iterable[str]) -> None:
    """Put ``names`` back to their values in ``before`` (removed where they were unset).

    For writes another library makes while this process spawns a child that
    needs them (vLLM's config writes before its engine process starts): the
    child has inherited them; the host must not keep them.
    """
    for name in names:
        previous = before.get(name)
        if previous is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = previous


def _restore(saved: Mapping[str, str]) -> None:
    for name in [name for name in os.environ if name not in saved]:
        os.environ.pop(name, None)
    for name, previous in saved.items():
        if os.environ.get(name) != previous:
            os.environ[name] = previous


def env_float(
    name: str,
    default: float,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    exclusive_minimum: bool = False,
) -> float:
    """A finite number from ``name`` within the bounds, else ``default`` when unset."""
    raw = env_str(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not _in_range(value, minimum, maximum, exclusive_minimum):
        raise InvalidSettingError(
            name, raw, _describe("a number", minimum, maximum, exclusive_minimum)
        )
    return value


def env_int(
    name: str, default: int, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    """A whole number from ``name`` within the bounds, else ``default`` when unset."""
    raw = env_str(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidSettingError(
            name, raw, _describe("a whole number", minimum, maximum)
        ) from None
    if not _in_range(value, minimum, maximum, False):
        raise InvalidSettingError(name, raw, _describe("a whole number", minimum, maximum))
    return value


def env_choice(name: str, default: str, choices: Collection[str]) -> str:
    """One of ``choices`` (case-insensitive) from ``name``, else ``default``."""
    raw = env_str(name)
    if raw is None:
        return default
    value = raw.lower()
    if value not in choices:
        raise InvalidSettingError(name, raw, "one of " + ", ".join(sorted(choices)))
    return value


def _in_range(value: float, low: float | None, high: float | None, exclusive_low: bool) -> bool:
    if not math.isfinite(value):
        return False
    if low is not None and (value < low or (exclusive_low and value == low)):
        return False
    return high is None or value <= high


def _describe(kind: str, low: float | None, high: float | None, exclusive_low: bool = False) -> str:
    if low is not None and high is not None:
        return f"{kind} from {low:g} to {high:g}"
    if low is not None:
        return f"{kind} {'above' if exclusive_low else 'of at least'} {low:g}"
    if high is not None:
        return f"{kind} of at most {high:g}"
    return kind
