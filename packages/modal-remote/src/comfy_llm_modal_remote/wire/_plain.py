"""The wire's plain data as a type: what may cross a process or network boundary.

Modal serializes a function's arguments and results itself; comfy-llm hands it
only this (and never pickles a class of its own): ``None``, bools, ints,
floats, strings, bytes (encoded images), and lists and string-keyed dicts of
them. The alias is recursive and exact, not ``Any`` under another name: a
reader narrows a value (``isinstance``) before it uses it, which is where the
"checked once where it enters" rule lives. Sequences and mappings are read-only
here so that a ``list[dict[str, int]]`` built by a writer is accepted as-is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ForwardRef, TypeAlias

__all__ = [
    "WireDict",
    "WireMapping",
    "WireValue",
    "as_float",
    "as_int",
    "as_items",
    "as_mapping",
    "as_strings",
]

if TYPE_CHECKING:
    WireValue: TypeAlias = (
        "bool | int | float | str | bytes | Sequence[WireValue] | Mapping[str, WireValue] | None"
    )
else:  # the same, as a reference that resolves in this module wherever it is read
    WireValue = ForwardRef(
        "bool | int | float | str | bytes | Sequence[WireValue] | Mapping[str, WireValue] | None",
        module=__name__,
    )
"""One plain value on the wire (recursive). ``typing.get_type_hints`` on a class
whose annotations name it (an error's ``__init__``) resolves it here, not in the
reader's module, which need not import ``Sequence`` or ``Mapping``."""

WireDict: TypeAlias = dict[str, WireValue]
"""A plain-data object a writer builds (a message, an envelope, a record)."""

WireMapping: TypeAlias = Mapping[str, WireValue]
"""A plain-data object a reader receives (read-only: writers' dicts of any value type fit)."""


def _refuse(value: WireValue, wanted: str) -> TypeError:
    return TypeError(f"expected {wanted}, got {type(value).__name__}")


def as_int(value: WireValue) -> int:
    """``int(value)`` for the scalars ``int()`` reads; TypeError for a list, dict or None."""
    if isinstance(value, bool | int | float | str | bytes):
        return int(value)
    raise _refuse(value, "a number")


def as_float(value: WireValue) -> float:
    """``float(value)`` for the scalars ``float()`` reads; TypeError for a list, dict or None."""
    if isinstance(value, bool | int | float | str | bytes):
        return float(value)
    raise _refuse(value, "a number")


def as_mapping(value: WireValue) -> WireMapping:
    """The value as an object; TypeError when it is not one."""
    if isinstance(value, Mapping):
        return value
    raise _refuse(value, "an object")


def as_items(value: WireValue) -> Sequence[WireValue]:
    """The value as a list (a tuple too); TypeError for a string, bytes or anything else."""
    if isinstance(value, list | tuple):
        return value
    raise _refuse(value, "a list")


def as_strings(value: WireValue) -> tuple[str, ...]:
    """A list of strings; TypeError when it is not one."""
    items = as_items(value)
    if all(isinstance(item, str) for item in items):
        return tuple(str(item) for item in items)
    raise _refuse(value, "a list of strings")
