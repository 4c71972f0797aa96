"""Hostile GGUF files: valid tiny GGUFs with one field rewritten to lie.

Each variant starts from a well-formed file (:mod:`gguf_checkpoints`) and
changes exactly one thing, found by walking the GGUF layout (header: magic,
version, tensor count, metadata count; metadata: key, type, value; tensor
infos: name, dimension count, dimensions, type, offset), so a check that
refuses it refuses that one lie. The walk here is independent of the
product's reader on purpose: the two must not share a mistake.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable

__all__ = ["HostileGguf", "hostile_model_variants", "hostile_projector_variants"]

_HEADER = 24  # magic 4, version 4, tensor count 8, metadata count 8
_ALIGNMENT = 32  # the files here set no general.alignment
_SCALAR_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


@dataclasses.dataclass(frozen=True)
class HostileGguf:
    """One hostile file.

    Attributes:
        name: A short id (also a good file name stem).
        content: The file's bytes.
        reason: A fragment the refusal's reason must contain.
    """

    name: str
    content: bytes
    reason: str


@dataclasses.dataclass(frozen=True)
class _Layout:
    """Where the fields of a GGUF file sit (byte offsets)."""

    values: dict[str, tuple[int, int]]  # key -> (offset of its type field, end of value)
    tensors: dict[str, int]  # name -> offset of its dimension-count field
    infos_end: int


def _string_end(data: bytes, at: int) -> int:
    (length,) = struct.unpack_from("<Q", data, at)
    return at + 8 + length


def _value_end(data: bytes, kind: int, at: int) -> int:
    if kind in _SCALAR_SIZES:
        return at + _SCALAR_SIZES[kind]
    if kind == 8:
        return _string_end(data, at)
    item_kind, count = struct.unpack_from("<IQ", data, at)
    at += 12
    for _ in range(count):
        at = _value_end(data, item_kind, at)
    return at


def _layout(data: bytes) -> _Layout:
    n_tensors, n_kv = struct.unpack_from("<QQ", data, 8)
    at = _HEADER
    values: dict[str, tuple[int, int]] = {}
    for _ in range(n_kv):
        key_end = _string_end(data, at)
        key = data[at + 8 : key_end].decode()
        (kind,) = struct.unpack_from("<I", data, key_end)
        end = _value_end(data, kind, key_end + 4)
        values[key] = (key_end, end)
        at = end
    tensors: dict[str, int] = {}
    for _ in range(n_tensors):
        name_end = _string_end(data, at)
        tensors[data[at + 8 : name_end].decode()] = name_end
        (n_dims,) = struct.unpack_from("<I", data, name_end)
        at = name_end + 4 + 8 * n_dims + 4 + 8
    return _Layout(values, tensors, at)


def _patch(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


def _tensor_field(data: bytes, layout: _Layout, name: str, field: str) -> int:
    """Offset of a tensor info's ``dim0``, ``type`` or ``offset`` field."""
    at = layout.tensors[name]
    (n_dims,) = struct.unpack_from("<I", data, at)
    return {"dim0": at + 4, "type": at + 4 + 8 * n_dims, "offset": at + 4 + 8 * n_dims + 4}[field]


def _splice(data: bytes, layout: _Layout, start: int, end: int, replacement: bytes) -> bytes:
    """Replace ``data[start:end]`` in the metadata and re-pad so the tensor data stays aligned."""
    data_start = -(-layout.infos_end // _ALIGNMENT) * _ALIGNMENT
    head = data[:start] + replacement + data[end : layout.infos_end]
    padding = b"\0" * (-len(head) % _ALIGNMENT)
    return head + padding + data[data_start:]


def _replace_string(data: bytes, layout: _Layout, key: str, new: str) -> bytes:
    type_at, end = layout.values[key]
    encoded = new.encode()
    return _splice(data, layout, type_at, end, struct.pack("<IQ", 8, len(encoded)) + encoded)


def _common(data: bytes, layout: _Layout) -> list[HostileGguf]:
    names = list(layout.tensors)
    first, second = names[0], names[1]
    chat_type_at = layout.values["general.name"][0]
    return [
        HostileGguf("wrong-magic", b"GGML" + data[4:], "does not start with 'GGUF'"),
        HostileGguf("empty", b"", "does not start with 'GGUF'"),
        HostileGguf("truncated-header", data[:20], "truncated"),
        HostileGguf("truncated-data", data[: len(data) // 2], "past the end of the file"),
        HostileGguf("version-1", _patch(data, 4, "<I", 1), "version 1 is not supported"),
        HostileGguf("big-endian", _patch(data, 4, ">I", 3), "big-endian"),
        HostileGguf("huge-tensor-count", _patch(data, 8, "<Q", 2**40), "tensors; the limit"),
        HostileGguf("huge-metadata-count", _patch(data, 16, "<Q", 2**40), "metadata entries"),
        HostileGguf(
            "oversize-string",
            _patch(data, chat_type_at + 4, "<Q", 2**40),
            "bytes long; the limit",
        ),
        HostileGguf(
            "string-past-end",
            _patch(data, chat_type_at + 4, "<Q", 1024 * 1024),
            "truncated",
        ),
        HostileGguf(
            "offset-past-end",
            _patch(data, _tensor_field(data, layout, second, "offset"), "<Q", 2**40),
            "claims offset",
        ),
        HostileGguf(
            "aliased-offset",
            _patch(data, _tensor_field(data, layout, second, "offset"), "<Q", 0),
            "claims offset 0",
        ),
        HostileGguf(
            "dimension-past-end",
            _patch(data, _tensor_field(data, layout, first, "dim0"), "<Q", 2**20),
            "past the end of the file",
        ),
        HostileGguf(
            "dimension-overflow",
            _patch(data, _tensor_field(data, layout, first, "dim0"), "<Q", 2**63),
            "above INT64_MAX",
        ),
        HostileGguf(
            "removed-ggml-type",
            _patch(data, _tensor_field(data, layout, first, "type"), "<I", 4),
            "unknown or removed ggml type 4",
        ),
        HostileGguf("split-part", _with_split(data, layout), "split GGUF"),
    ]


def _with_split(data: bytes, layout: _Layout) -> bytes:
    """Rename ``general.name`` to ``split.count`` (a u16 of 2): a split part."""
    type_at, end = layout.values["general.name"]
    key_at = type_at - 8 - len(b"general.name")
    key = b"split.count"
    entry = struct.pack("<Q", len(key)) + key + struct.pack("<IH", 2, 2)
    return _splice(data, layout, key_at, end, entry)


def hostile_model_variants(model: bytes) -> list[HostileGguf]:
    """Hostile variants of a valid model GGUF (one lie each).

    Args:
        model: A valid model file (e.g. from ``build_gguf_files``).

    Returns:
        The variants, each with the reason fragment its refusal must carry.
        Variants that move bytes (a longer or shorter value) are not checked
        for tensor placement: the walk re-reads the layout for each.
    """
    layout = _layout(model)
    tokens_type_at = layout.values["tokenizer.ggml.tokens"][0]
    variants = _common(model, layout)
    rewrites: list[tuple[str, Callable[[], bytes], str]] = [
        (
            "huge-array-count",
            lambda: _patch(model, tokens_type_at + 8, "<Q", 2**40),
            "items; the limit",
        ),
        (
            "array-past-end",
            lambda: _patch(model, tokens_type_at + 8, "<Q", 2**22),
            "but the file ends at",
        ),
        (
            "unsupported-architecture",
            lambda: _replace_string(model, layout, "general.architecture", "bert"),
            "architecture 'bert' is not one this engine loads",
        ),
        (
            "token-id-out-of-range",
            lambda: _patch(model, layout.values["tokenizer.ggml.eos_token_id"][0] + 4, "<I", 10**6),
            "tokenizer.ggml.eos_token_id is 1000000",
        ),
    ]
    variants.extend(HostileGguf(name, build(), reason) for name, build, reason in rewrites)
    return variants


def hostile_projector_variants(mmproj: bytes) -> list[HostileGguf]:
    """Hostile variants of a valid projector GGUF (one lie each).

    Args:
        mmproj: A valid projector file.

    Returns:
        The variants, each with the reason fragment its refusal must carry.
    """
    layout = _layout(mmproj)
    variants = _common(mmproj, layout)
    variants.append(
        HostileGguf(
            "audio-projector",
            _replace_string(mmproj, layout, "clip.projector_type", "qwen2a"),
            "projector type 'qwen2a' is not a vision projector",
        )
    )
    variants.append(
        HostileGguf(
            "huge-image-size",
            _patch(mmproj, layout.values["clip.vision.image_size"][0] + 4, "<I", 2**31),
            "clip.vision.image_size is 2147483648",
        )
    )
    return variants
