"""A bounded GGUF reader: the header, every metadata value and every tensor's place.

GGUF is parsed by C++ (``ggml/src/gguf.cpp`` and llama.cpp's model loader);
hostile files have crashed it before, so a file is read here first, in pure
Python, with every count and length checked against a limit and against the
bytes actually left in the file *before* anything is allocated or read. The
tensor data itself is never read: only its place (offset and size) is checked
against the file's size.

Why not the ``gguf`` package's ``GGUFReader``: it memory-maps the whole file
and trusts the counts it reads (an array count past the end of the file gives
a short slice, read silently, or an ``IndexError``/``ValueError`` from deep
inside numpy; a huge array of strings loops element by element), and it
needs numpy. This module needs the standard library only, so the check can
live wherever a GGUF enters (see the README: staging's weight-format rule).

The rules follow llama.cpp's own reader where it has one (cited as
``gguf.cpp:LINE`` of the llama.cpp vendored by llama-cpp-python 0.3.36) and
are stricter where it only bounds by ``SIZE_MAX`` or 1 GiB.
"""

from __future__ import annotations

import dataclasses
import os
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import BinaryIO, Final

__all__ = [
    "GGML_TYPES",
    "GGUF_LIMITS",
    "GgufFile",
    "GgufFormatError",
    "GgufLimits",
    "GgufTensor",
    "read_gguf",
]

_MAGIC: Final = b"GGUF"
#: GGUFv1 is refused by llama.cpp (gguf.cpp:512); v3 is the newest (gguf.h:42).
_VERSIONS: Final = (2, 3)
_DEFAULT_ALIGNMENT: Final = 32  # gguf.h:46
_MAX_DIMS: Final = 4  # GGML_MAX_DIMS
_MAX_NAME_BYTES: Final = 63  # GGML_MAX_NAME is 64 with the terminating NUL (gguf.cpp:658)
_INT64_MAX: Final = 2**63 - 1

#: ggml type id -> (name, elements per block, bytes per block), from
#: ``ggml/src/ggml.c`` ``type_traits`` and ``ggml-common.h``; removed ids
#: (4, 5, 31-33, 36-38) are absent and refused.
GGML_TYPES: Final[Mapping[int, tuple[str, int, int]]] = {
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    2: ("Q4_0", 32, 18),
    3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24),
    8: ("Q8_0", 32, 34),
    9: ("Q8_1", 32, 36),
    10: ("Q2_K", 256, 84),
    11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176),
    14: ("Q6_K", 256, 210),
    15: ("Q8_K", 256, 292),
    16: ("IQ2_XXS", 256, 66),
    17: ("IQ2_XS", 256, 74),
    18: ("IQ3_XXS", 256, 98),
    19: ("IQ1_S", 256, 50),
    20: ("IQ4_NL", 32, 18),
    21: ("IQ3_S", 256, 110),
    22: ("IQ2_S", 256, 82),
    23: ("IQ4_XS", 256, 136),
    24: ("I8", 1, 1),
    25: ("I16", 1, 2),
    26: ("I32", 1, 4),
    27: ("I64", 1, 8),
    28: ("F64", 1, 8),
    29: ("IQ1_M", 256, 56),
    30: ("BF16", 1, 2),
    34: ("TQ1_0", 256, 54),
    35: ("TQ2_0", 256, 66),
    39: ("MXFP4", 32, 17),
    40: ("NVFP4", 64, 36),
    41: ("Q1_0", 128, 18),
    42: ("Q2_0", 64, 18),
}

# GGUF metadata value types (gguf.h enum gguf_type): id -> (name, struct format or None).
_UINT8, _INT8, _UINT16, _INT16, _UINT32, _INT32, _FLOAT32, _BOOL = range(8)
_STRING, _ARRAY, _UINT64, _INT64, _FLOAT64 = 8, 9, 10, 11, 12
_SCALARS: Final[Mapping[int, str]] = {
    _UINT8: "<B",
    _INT8: "<b",
    _UINT16: "<H",
    _INT16: "<h",
    _UINT32: "<I",
    _INT32: "<i",
    _FLOAT32: "<f",
    _BOOL: "<b",
    _UINT64: "<Q",
    _INT64: "<q",
    _FLOAT64: "<d",
}


class GgufFormatError(ValueError):
    """The bytes are not a GGUF file this reader accepts; ``reason`` says why.

    Attributes:
        reason: One line: what was wrong, with the value and the limit.
    """

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


@dataclasses.dataclass(frozen=True, slots=True)
class GgufLimits:
    """Bounds on what a GGUF file may declare (each far above any real model's).

    Attributes:
        max_tensors: Tensor count (a 671B MoE has ~1,100; experts are merged).
        max_metadata_entries: Key-value pairs (real files have ~30-60).
        max_key_bytes: Length of one key.
        max_string_bytes: Length of one string (chat templates run to ~100 KB).
        max_array_items: Items in one array (vocabularies ~262k, merges ~500k).
        max_metadata_bytes: Header, metadata and tensor infos together.
    """

    max_tensors: int = 100_000
    max_metadata_entries: int = 10_000
    max_key_bytes: int = 1_024
    max_string_bytes: int = 4 * 1024 * 1024
    max_array_items: int = 8 * 1024 * 1024
    max_metadata_bytes: int = 512 * 1024 * 1024


GGUF_LIMITS: Final = GgufLimits()


@dataclasses.dataclass(frozen=True, slots=True)
class GgufTensor:
    """One tensor's description (its data is not read).

    Attributes:
        name: Tensor name (``blk.0.attn_q.weight``, ...).
        ggml_type: ggml type name (``F32``, ``Q4_K``, ...).
        shape: Elements per dimension, innermost first (GGUF order).
        offset: Offset of the data from the start of the data section.
        nbytes: Size of the data in bytes.
    """

    name: str
    ggml_type: str
    shape: tuple[int, ...]
    offset: int
    nbytes: int


@dataclasses.dataclass(frozen=True, slots=True)
class GgufFile:
    """What a checked GGUF file declares.

    Attributes:
        path: The file.
        size: Its size in bytes.
        version: GGUF version (2 or 3).
        alignment: Data alignment (``general.alignment``, default 32).
        metadata: Every key-value pair; arrays as tuples.
        tensors: Every tensor, in file order.
        data_offset: Where the data section starts in the file.
    """

    path: Path
    size: int
    version: int
    alignment: int
    metadata: Mapping[str, object]
    tensors: tuple[GgufTensor, ...]
    data_offset: int

    def string(self, key: str) -> str | None:
        """The metadata string under ``key``, or None when absent or not a string."""
        value = self.metadata.get(key)
        return value if isinstance(value, str) else None

    def integer(self, key: str) -> int | None:
        """The metadata integer under ``key``, or None when absent or not an integer."""
        value = self.metadata.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None


class _Reader:
    """Sequential reads that never go past the end of the file or the metadata bound."""

    def __init__(self, handle: BinaryIO, size: int, limits: GgufLimits) -> None:
        self._handle = handle
        self._size = size
        self._limit = min(size, limits.max_metadata_bytes)
        self.position = 0

    def remaining(self) -> int:
        return self._limit - self.position

    def require(self, count: int, what: str) -> None:
        """Refuse a read of ``count`` bytes past the file's end or the metadata bound."""
        if count <= self.remaining():
            return
        if self.position + count > self._size:
            raise GgufFormatError(
                f"truncated: {what} needs {count} bytes at offset {self.position}, "
                f"but the file ends at {self._size}"
            )
        raise GgufFormatError(
            f"the metadata runs past {self._limit} bytes (the limit) while reading {what}"
        )

    def take(self, count: int, what: str) -> bytes:
        self.require(count, what)
        data = self._handle.read(count)
        if len(data) != count:
            raise GgufFormatError(f"truncated: the file ended while reading {what}")
        self.position += count
        return data

    def scalar(self, fmt: str, what: str) -> int | float:
        value: int | float = struct.unpack(fmt, self.take(struct.calcsize(fmt), what))[0]
        return value

    def u32(self, what: str) -> int:
        return int(self.scalar("<I", what))

    def u64(self, what: str) -> int:
        return int(self.scalar("<Q", what))

    def string(self, what: str, limit: int) -> str:
        length = self.u64(f"the length of {what}")
        if length > limit:
            raise GgufFormatError(f"{what} is {length} bytes long; the limit is {limit}")
        raw = self.take(length, what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise GgufFormatError(f"{what} is not UTF-8 ({error.reason})") from None


def _value(reader: _Reader, kind: int, what: str, limits: GgufLimits) -> object:
    """Read one metadata value of GGUF type ``kind``."""
    if kind in _SCALARS:
        value = reader.scalar(_SCALARS[kind], what)
        return bool(value) if kind == _BOOL else value
    if kind == _STRING:
        return reader.string(what, limits.max_string_bytes)
    if kind != _ARRAY:
        raise GgufFormatError(f"{what} has unknown value type {kind}")
    item_kind = reader.u32(f"the item type of {what}")
    count = reader.u64(f"the item count of {what}")
    if item_kind == _ARRAY:  # nested arrays are refused by llama.cpp (gguf.cpp:607-611)
        raise GgufFormatError(f"{what} is an array of arrays")
    if item_kind not in _SCALARS and item_kind != _STRING:
        raise GgufFormatError(f"{what} is an array of unknown type {item_kind}")
    if count > limits.max_array_items:
        raise GgufFormatError(
            f"{what} declares {count} items; the limit is {limits.max_array_items}"
        )
    # Each item takes at least its own size (a string at least its 8-byte length).
    least = struct.calcsize(_SCALARS[item_kind]) if item_kind in _SCALARS else 8
    reader.require(count * least, f"the {count} items of {what}")
    if item_kind == _STRING:
        return tuple(
            reader.string(f"item {index} of {what}", limits.max_string_bytes)
            for index in range(count)
        )
    fmt = _SCALARS[item_kind]
    raw = reader.take(count * struct.calcsize(fmt), what)
    items = struct.unpack(f"<{count}{fmt[1:]}", raw)
    return tuple(bool(item) for item in items) if item_kind == _BOOL else tuple(items)


def _metadata(reader: _Reader, count: int, limits: GgufLimits) -> dict[str, object]:
    metadata: dict[str, object] = {}
    for index in range(count):
        key = reader.string(f"metadata key {index}", limits.max_key_bytes)
        if not key:
            raise GgufFormatError(f"metadata key {index} is empty")
        if key in metadata:
            raise GgufFormatError(f"metadata key {key!r} appears twice")
        kind = reader.u32(f"the value type of {key!r}")
        metadata[key] = _value(reader, kind, f"metadata {key!r}", limits)
    return metadata


def _alignment(metadata: Mapping[str, object]) -> int:
    value = metadata.get("general.alignment", _DEFAULT_ALIGNMENT)
    if isinstance(value, bool) or not isinstance(value, int):
        raise GgufFormatError(f"general.alignment is {value!r}, not an integer")
    if value <= 0 or value & (value - 1) or value > 1 << 20:
        raise GgufFormatError(f"general.alignment is {value}, not a power of two up to 1 MiB")
    return value


def _tensor_info(reader: _Reader, index: int) -> tuple[str, int, tuple[int, ...], int]:
    name = reader.string(f"the name of tensor {index}", _MAX_NAME_BYTES)
    n_dims = reader.u32(f"the dimension count of tensor {name!r}")
    if not 1 <= n_dims <= _MAX_DIMS:
        raise GgufFormatError(f"tensor {name!r} has {n_dims} dimensions; 1 to {_MAX_DIMS} allowed")
    shape = tuple(reader.u64(f"dimension {d} of tensor {name!r}") for d in range(n_dims))
    type_id = reader.u32(f"the type of tensor {name!r}")
    offset = reader.u64(f"the offset of tensor {name!r}")
    return name, type_id, shape, offset


def _tensor_bytes(name: str, type_id: int, shape: tuple[int, ...]) -> tuple[str, int]:
    """The type name and byte size of a tensor, refusing unknown types and bad shapes."""
    if type_id not in GGML_TYPES:
        raise GgufFormatError(f"tensor {name!r} has unknown or removed ggml type {type_id}")
    type_name, block, block_bytes = GGML_TYPES[type_id]
    elements = 1
    for dim in shape:
        if dim > _INT64_MAX:
            raise GgufFormatError(f"tensor {name!r} has dimension {dim}, above INT64_MAX")
        elements *= dim
    if elements > _INT64_MAX:
        raise GgufFormatError(f"tensor {name!r} has {elements} elements, above INT64_MAX")
    if shape[0] % block:
        raise GgufFormatError(
            f"tensor {name!r} of type {type_name} has rows of {shape[0]} elements, "
            f"not a multiple of its block of {block}"
        )
    return type_name, elements // block * block_bytes


def _pad(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


def _tensors(
    reader: _Reader, count: int, alignment: int, file_size: int
) -> tuple[tuple[GgufTensor, ...], int]:
    """Read every tensor info and check each tensor's place in the data section."""
    infos = [_tensor_info(reader, index) for index in range(count)]
    data_offset = _pad(reader.position, alignment)
    seen: set[str] = set()
    tensors: list[GgufTensor] = []
    expected = 0
    for name, type_id, shape, offset in infos:
        if name in seen:
            raise GgufFormatError(f"tensor {name!r} appears twice")
        seen.add(name)
        type_name, nbytes = _tensor_bytes(name, type_id, shape)
        # llama.cpp requires each tensor right after the previous one, padded (gguf.cpp:794-800).
        if offset != expected:
            raise GgufFormatError(
                f"tensor {name!r} claims offset {offset}, but the previous tensors end at "
                f"{expected} (tensors must follow each other, aligned to {alignment})"
            )
        end = data_offset + offset + nbytes
        if end > file_size:
            raise GgufFormatError(
                f"tensor {name!r} ({type_name}, shape {list(shape)}, {nbytes} bytes at offset "
                f"{offset}) ends at byte {end}, past the end of the file ({file_size} bytes)"
            )
        tensors.append(GgufTensor(name, type_name, shape, offset, nbytes))
        expected = _pad(offset + nbytes, alignment)
    return tuple(tensors), data_offset


def read_gguf(path: Path | str, limits: GgufLimits = GGUF_LIMITS) -> GgufFile:
    """Read and check a GGUF file's header, metadata and tensor table.

    Args:
        path: The file.
        limits: The bounds (defaults: :data:`GGUF_LIMITS`).

    Returns:
        What the file declares.

    Raises:
        GgufFormatError: The file breaks a rule; ``reason`` names the value and
            the limit.
        OSError: The file cannot be opened or read.
    """
    path = Path(path)
    with path.open("rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        reader = _Reader(handle, size, limits)
        magic = reader.take(4, "the magic") if size >= 4 else b""
        if magic != _MAGIC:
            raise GgufFormatError(f"the file does not start with 'GGUF' (it starts with {magic!r})")
        version = reader.u32("the version")
        if version not in _VERSIONS:
            hint = " (a big-endian file?)" if version & 0xFFFF == 0 and version else ""
            raise GgufFormatError(f"GGUF version {version} is not supported (2 or 3){hint}")
        n_tensors = reader.u64("the tensor count")
        n_metadata = reader.u64("the metadata count")
        if n_tensors > limits.max_tensors:
            raise GgufFormatError(
                f"it declares {n_tensors} tensors; the limit is {limits.max_tensors}"
            )
        if n_metadata > limits.max_metadata_entries:
            raise GgufFormatError(
                f"it declares {n_metadata} metadata entries; the limit is "
                f"{limits.max_metadata_entries}"
            )
        metadata = _metadata(reader, n_metadata, limits)
        alignment = _alignment(metadata)
        tensors, data_offset = _tensors(reader, n_tensors, alignment, size)
    return GgufFile(
        path=path,
        size=size,
        version=version,
        alignment=alignment,
        metadata=metadata,
        tensors=tensors,
        data_offset=data_offset,
    )
