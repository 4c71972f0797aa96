"""The prepared, engine-neutral request inputs and their wire form."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Final

from comfy_llm_core import Modality
from PIL import Image

from ._parts import PART_KINDS, ImagePart, Part, TextPart, VideoFramePart, part_from_wire
from .errors import InputError

COUNT_KEYS: Final = (
    *(kind.count_key for kind in PART_KINDS.values() if kind.count_key),
    "file_count",
)
"""The metadata keys :meth:`PreparedInputs.counts` fills, in order."""

WIRE_VERSION = 2
"""2: a tuple of tagged parts (1 named each modality: ``prompt``, ``images``,
``video_frames``; still read)."""


@dataclasses.dataclass(frozen=True)
class PreparedInputs:
    """Everything a backend needs from the node's inputs; no engine objects.

    Attributes:
        parts: The user turn, in the order the model sees it (see ``_parts``):
            media parts, then the prompt's :class:`TextPart`.
        system_prompt: The system prompt, or ``None``.
        file_names: Names of the files whose text is in the prompt.
    """

    parts: tuple[Part, ...]
    system_prompt: str | None = None
    file_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        """Normalise sequences to tuples.

        Raises:
            InputError: A field has the wrong type.
        """
        parts = tuple(self.parts)
        for part in parts:
            if not isinstance(part, Part):
                raise InputError(f"PreparedInputs.parts holds a {type(part).__name__}")
        if self.system_prompt is not None and not isinstance(self.system_prompt, str):
            raise InputError("PreparedInputs.system_prompt must be a str or None")
        object.__setattr__(self, "parts", parts)
        object.__setattr__(self, "file_names", tuple(str(name) for name in self.file_names))

    @classmethod
    def text(
        cls,
        prompt: str,
        *media: Part,
        system_prompt: str | None = None,
        file_names: Sequence[str] = (),
    ) -> PreparedInputs:
        """A request of ``media`` parts (in order) followed by the ``prompt``."""
        return cls((*media, TextPart(prompt)), system_prompt, tuple(file_names))

    @property
    def prompt(self) -> str:
        """The text the user turn carries (every text part, in order)."""
        return "".join(part.text for part in self.parts if isinstance(part, TextPart))

    @property
    def media(self) -> tuple[Part, ...]:
        """Every part that is not text, in order."""
        return tuple(part for part in self.parts if not isinstance(part, TextPart))

    def images_in_order(self) -> list[Image.Image]:
        """Every picture the model sees, in order: images, then video frames as images."""
        return [part.image for part in self.parts if isinstance(part, ImagePart | VideoFramePart)]

    @property
    def modalities(self) -> frozenset[Modality]:
        """The modalities the request carries (text always; file when a file was read)."""
        found = {Modality.TEXT, *(part.modality for part in self.parts)}
        if self.file_names:
            found.add(Modality.FILE)
        return frozenset(found)

    def counts(self) -> dict[str, int]:
        """How many of each kind the request carries, by metadata key.

        Returns:
            ``image_count``, ``video_frame_count`` (one key per counted part
            kind, zero included) and ``file_count``, in that order.
        """
        counts = dict.fromkeys(COUNT_KEYS, 0)
        for part in self.parts:
            if part.count_key:
                counts[part.count_key] += 1
        counts["file_count"] = len(self.file_names)
        return counts

    def with_text(self, extra: str) -> PreparedInputs:
        """The same request with ``extra`` appended to its (last) text part."""
        parts = list(self.parts)
        for at in range(len(parts) - 1, -1, -1):
            part = parts[at]
            if isinstance(part, TextPart):
                parts[at] = TextPart(part.text + extra)
                return dataclasses.replace(self, parts=tuple(parts))
        return dataclasses.replace(self, parts=(*parts, TextPart(extra)))

    def to_wire(self) -> dict[str, Any]:
        """Return plain values (str, int, float, None, bytes, lists, dicts).

        Each part is tagged with its kind (images as PNG bytes), so the result
        can be pickled, msgpack'ed or CBOR-encoded and shipped to a remote worker.

        Returns:
            A dict that :meth:`from_wire` turns back into an equal object.
        """
        return {
            "version": WIRE_VERSION,
            "system_prompt": self.system_prompt,
            "parts": [part.to_wire() for part in self.parts],
            "file_names": list(self.file_names),
        }

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> PreparedInputs:
        """Rebuild prepared inputs from :meth:`to_wire` output (or version 1's).

        Raises:
            InputError: Unknown version, missing or mistyped fields, an
                unknown part kind, or image bytes that are not a PNG.
        """
        version = data.get("version") if isinstance(data, Mapping) else None
        if version not in (1, WIRE_VERSION):
            raise InputError(
                f"Prepared inputs wire version {version!r} is not {WIRE_VERSION} (or 1); update "
                "comfy-llm-inputs on both sides to the same version"
            )
        try:
            if version == 1:
                parts: list[Any] = [{"kind": "image", "image": image} for image in data["images"]]
                parts += [{"kind": "video_frame", **frame} for frame in data["video_frames"]]
                parts.append({"kind": "text", "text": data["prompt"]})
            else:
                parts = list(data["parts"])
            return cls(
                parts=tuple(part_from_wire(part) for part in parts),
                system_prompt=data.get("system_prompt"),
                file_names=tuple(data["file_names"]),
            )
        except (KeyError, TypeError, ValueError) as error:
            if isinstance(error, InputError):
                raise
            raise InputError(f"Prepared inputs wire data is malformed: {error!r}") from error
