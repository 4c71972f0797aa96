"""Stand-in for ``comfy_api.latest.io``: only what the node uses (tests only)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class Input:
    """A node input (socket or widget)."""

    io_type = "*"

    def __init__(
        self,
        id: str,
        display_name: str | None = None,
        optional: bool = False,
        tooltip: str | None = None,
        default: Any = None,
        extra_dict: dict[str, Any] | None = None,
        **options: Any,
    ) -> None:
        self.id = id
        self.display_name = display_name
        self.optional = optional
        self.tooltip = tooltip
        self.default = default
        # 0.33's Input keeps extra_dict apart and merges it into the input's spec
        # (comfy_api/latest/_io.py Input.__init__, as_dict)
        self.extra_dict = extra_dict if extra_dict is not None else {}
        self.options = options


class Output:
    """A node output."""

    io_type = "*"

    def __init__(
        self,
        id: str | None = None,
        display_name: str | None = None,
        tooltip: str | None = None,
        is_output_list: bool = False,
    ) -> None:
        self.id = id
        self.display_name = display_name or id
        self.tooltip = tooltip
        self.is_output_list = is_output_list


def _comfy_type(name: str) -> type:
    input_cls = type("Input", (Input,), {"io_type": name})
    output_cls = type("Output", (Output,), {"io_type": name})
    return type(name, (), {"io_type": name, "Input": input_cls, "Output": output_cls})


String = _comfy_type("STRING")
Int = _comfy_type("INT")
Float = _comfy_type("FLOAT")
Boolean = _comfy_type("BOOLEAN")
Image = _comfy_type("IMAGE")
Video = _comfy_type("VIDEO")


class _ComboInput(Input):
    io_type = "COMBO"

    def __init__(self, id: str, options: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(id, **kwargs)
        self.options_list = list(options or [])


Combo = type(
    "COMBO",
    (),
    {
        "io_type": "COMBO",
        "Input": _ComboInput,
        "Output": type("Output", (Output,), {"io_type": "COMBO"}),
    },
)


def Custom(io_type: str) -> type:
    """A custom socket type, e.g. ``Custom("OPENAI_INPUT_FILES")``."""
    return _comfy_type(io_type)


class ControlAfterGenerate(str, Enum):
    """What the frontend does to a seed-like INT after each run (ComfyUI 0.33)."""

    fixed = "fixed"
    increment = "increment"
    decrement = "decrement"
    randomize = "randomize"


class Hidden(str, Enum):
    """Hidden inputs a node can ask for."""

    unique_id = "UNIQUE_ID"
    prompt = "PROMPT"
    extra_pnginfo = "EXTRA_PNGINFO"


@dataclass
class Schema:
    """A node's schema (the fields the node sets)."""

    node_id: str
    display_name: str | None = None
    category: str = "sd"
    inputs: list[Input] = field(default_factory=list)
    outputs: list[Output] = field(default_factory=list)
    hidden: list[Hidden] = field(default_factory=list)
    description: str = ""
    is_output_node: bool = False
    not_idempotent: bool = False
    search_aliases: list[str] = field(default_factory=list)
    has_intermediate_output: bool | None = None


class HiddenHolder:
    """What ``cls.hidden`` holds during execution."""

    def __init__(self, unique_id: str | None = None, prompt: Any = None) -> None:
        self.unique_id = unique_id
        self.prompt = prompt


class ComfyNode:
    """Base class of V3 nodes."""

    hidden: HiddenHolder | None = None

    @classmethod
    def define_schema(cls) -> Schema:
        raise NotImplementedError

    @classmethod
    def execute(cls, **kwargs: Any) -> NodeOutput:
        raise NotImplementedError


class NodeOutput:
    """A node's outputs, in schema order."""

    def __init__(self, *args: Any, ui: Any = None) -> None:
        self.args = args
        self.ui = ui

    @property
    def result(self) -> tuple[Any, ...] | None:
        return self.args if self.args else None

    def __getitem__(self, index: int) -> Any:
        return self.args[index]
