"""A GGUF repository on the Hub: its quantizations, and the two files one choice downloads.

A GGUF repository (``ggml-org/<model>-GGUF``, ``unsloth/<model>-GGUF``, ...)
holds one model file per quantization (``<name>-Q4_K_M.gguf``) and one or
more vision projectors (``mmproj-<name>-F16.gguf``), with no config.json.
From the model info alone (file names, sizes, LFS sha256) this lists the
quantizations on offer and picks, for one ``quantization`` choice (default
``Q4_K_M`` where present), the model file and its projector: the only two
files staging downloads, each verified against its sha256. Split files
(``-00001-of-00003.gguf``) are left out: the engine refuses split parts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from comfy_llm_profiles._gguf_rules import FILE_TYPES
from comfy_llm_profiles._inspect import RepositoryFile
from comfy_llm_profiles._local_gguf import GGUF_SUFFIX, is_projector_name
from comfy_llm_profiles._refusals import unsupported_quantization, unusable_gguf_repository

__all__ = [
    "DEFAULT_GGUF_QUANTIZATION",
    "HubGgufChoice",
    "choose_hub_gguf",
    "hub_gguf_quantizations",
]

DEFAULT_GGUF_QUANTIZATION: Final = "Q4_K_M"
"""The usual size/quality middle (llama.cpp's and LM Studio's default download)."""

# Projector precision in order of preference: the converter's default (F16) first.
_PROJECTOR_ORDER: Final = ("F16", "BF16", "F32", "Q8_0")
_NAMES: Final = sorted({*FILE_TYPES.values(), "UD-Q4_K_XL"}, key=len, reverse=True)
_QUANT: Final = re.compile(
    r"(?<![A-Za-z0-9])(" + "|".join(re.escape(n) for n in _NAMES) + r")(?![A-Za-z0-9])",
    re.IGNORECASE,
)
_SPLIT: Final = re.compile(r"-\d{5}-of-\d{5}\.gguf$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class HubGgufChoice:
    """The files one quantization of a GGUF repository downloads.

    Attributes:
        quantization: The chosen quantization (``Q4_K_M``).
        model: The model file.
        projector: Its vision projector, None when the repository has none.
        offered: Every quantization the repository offers, sorted.
    """

    quantization: str
    model: RepositoryFile
    projector: RepositoryFile | None
    offered: tuple[str, ...]

    @property
    def files(self) -> tuple[RepositoryFile, ...]:
        """The files to download (model first)."""
        return (self.model,) if self.projector is None else (self.model, self.projector)

    @property
    def download_bytes(self) -> int:
        """Their total size (0 for a size the Hub did not give)."""
        return sum(f.size or 0 for f in self.files)


def _quantization(name: str) -> str | None:
    found = _QUANT.findall(name.rsplit("/", 1)[-1])
    return found[-1].upper() if found else None


def hub_gguf_quantizations(files: Iterable[RepositoryFile]) -> dict[str, RepositoryFile]:
    """Quantization -> model file, for the repository's single-file model GGUFs."""
    offered: dict[str, RepositoryFile] = {}
    for file in sorted(files, key=lambda f: f.path):
        name = file.path.rsplit("/", 1)[-1]
        if not name.lower().endswith(GGUF_SUFFIX) or is_projector_name(name) or _SPLIT.search(name):
            continue
        quantization = _quantization(name)
        if quantization is not None:
            offered.setdefault(quantization, file)
    return offered


def _projector(files: Iterable[RepositoryFile]) -> RepositoryFile | None:
    projectors = sorted(
        (f for f in files if is_projector_name(f.path.rsplit("/", 1)[-1])), key=lambda f: f.path
    )
    for precision in _PROJECTOR_ORDER:
        for file in projectors:
            if _quantization(file.path) == precision:
                return file
    return projectors[0] if projectors else None


def choose_hub_gguf(
    repository: str,
    revision: str,
    target: str,
    files: Iterable[RepositoryFile],
    quantization: str | None = None,
) -> HubGgufChoice:
    """Pick the model file of ``quantization`` (default Q4_K_M, or the only one) and its projector.

    Raises:
        GgufRepositoryError: No single-file model GGUF, or a chosen file without
            its LFS sha256 (it could not be verified after download).
        UnsupportedQuantizationError: The quantization is not offered, or none
            was given and there is no default to fall back on (lists the offer).
    """
    files = tuple(files)
    offered = hub_gguf_quantizations(files)
    where = (repository, revision, target)
    if not offered:
        ggufs = [f.path for f in files if f.path.lower().endswith(GGUF_SUFFIX)]
        raise unusable_gguf_repository(
            where, f"no single-file model .gguf (GGUF files: {', '.join(ggufs) or 'none'})"
        )
    wanted = quantization.upper() if quantization else None
    if wanted is None:
        if DEFAULT_GGUF_QUANTIZATION in offered:
            wanted = DEFAULT_GGUF_QUANTIZATION
        elif len(offered) == 1:
            wanted = next(iter(offered))
    if wanted is None or wanted not in offered:
        raise unsupported_quantization(
            where,
            quantization=quantization or f"{DEFAULT_GGUF_QUANTIZATION} (the default)",
            allowed=sorted(offered),
            advice="Choose one of the quantizations this GGUF repository offers.",
        )
    choice = HubGgufChoice(wanted, offered[wanted], _projector(files), tuple(sorted(offered)))
    unverifiable = [f.path for f in choice.files if f.sha256 is None]
    if unverifiable:
        raise unusable_gguf_repository(
            where, f"{unverifiable[0]} has no LFS sha256, so it could not be verified"
        )
    return choice
