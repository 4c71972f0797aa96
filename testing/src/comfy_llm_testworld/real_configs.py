"""The popular checkpoints of the reviewed families, as the fake Hub can serve them offline.

Each entry is a reconstruction of a real repository's small files
(``config.json``, ``preprocessor_config.json``, ``tokenizer_config.json``)
at a commit, with its safetensors total: enough for the profiles' metadata
inspection, the picker's sizes and the memory estimate, never for weights
(:func:`real_checkpoint_files` serves a stub ``model.safetensors`` whose
reported size is overridden with :meth:`FakeHub.tamper`).

Nothing here was downloaded. ``revision`` is a commit seen in public
material (``revision_source`` says where; None: still to pin when the Hub
can be reached), ``parameters`` the published size the reconstruction is
checked against, ``verified`` what was checked.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from comfy_llm_testworld._real_configs_a import CONFIGS_A
from comfy_llm_testworld._real_configs_b import CONFIGS_B

if TYPE_CHECKING:
    from comfy_llm_testworld import FakeHub

__all__ = ["REAL_CHECKPOINTS", "RealCheckpoint", "real_checkpoint_files", "serve_real_checkpoint"]

_PARSED = "parsed by Transformers 5.24's config class; meta-device parameter count checked"


@dataclass(frozen=True)
class RealCheckpoint:
    """One popular checkpoint, reconstructed.

    Attributes:
        repository: ``owner/model``.
        family: The family builder it belongs to (``families.FAMILY_KINDS``).
        revision: A 40-hex commit seen in public material, or None (to pin).
        revision_source: Where the commit was seen, or why it is still open.
        parameters: The published parameter count (model card / Hub page).
        gated: The repository asks users to accept a licence first.
        verified: What the reconstruction was checked against.
        video: The checkpoint was trained for video input.
    """

    repository: str
    family: str
    revision: str | None
    revision_source: str
    parameters: float
    gated: bool = False
    verified: str = _PARSED
    video: bool = False

    @property
    def weight_bytes(self) -> int:
        """The safetensors total of a 16-bit checkpoint of this size (2 bytes a parameter)."""
        return int(self.parameters * 2)


_CACHE_PATHS = "in Hugging Face cache paths (…/snapshots/<sha>) of public code"

REAL_CHECKPOINTS: dict[str, RealCheckpoint] = {
    entry.repository: entry
    for entry in (
        RealCheckpoint(
            "Qwen/Qwen2.5-VL-3B-Instruct",
            "qwen2_5_vl",
            "66285546d2b821cf421d4f5eb2576359d3770cd3",
            f"{_CACHE_PATHS} and from_pretrained(revision=...) calls (one older: 1b989f2c…)",
            3.75e9,
            video=True,
        ),
        RealCheckpoint(
            "Qwen/Qwen2-VL-2B-Instruct",
            "qwen2_vl",
            "895c3a49bc3fa70a340399125c650a463535e71c",
            _CACHE_PATHS,
            2.21e9,
            video=True,
        ),
        RealCheckpoint(
            "google/gemma-3-4b-it",
            "gemma3",
            "093f9f388b31de276ce2de164bdc2081324b9767",
            f"{_CACHE_PATHS} (one other: fb45cab2…)",
            4.30e9,
            gated=True,
        ),
        RealCheckpoint(
            "llava-hf/llava-1.5-7b-hf",
            "llava",
            "b234b804b114d9e37bb655e11cbbb5f5e971b7a9",
            f"{_CACHE_PATHS}; four commits are in use (also 8c85e9a4…, 6b713551…, 6ceb2ed3…)",
            7.06e9,
        ),
        RealCheckpoint(
            "fancyfeast/llama-joycaption-beta-one-hf-llava",
            "llava_joycaption",
            None,
            "to pin: no commit of it appears in the stored public code",
            8.48e9,
        ),
        RealCheckpoint(
            "llava-hf/llava-v1.6-mistral-7b-hf",
            "llava_next",
            "a1d521368f8d353afa4da2ed2bb1bf646ef1ff5f",
            f"{_CACHE_PATHS}; several in use (also d7f9c48a…, 52320fb5…, 216670a1…, 144bfb96…)",
            7.57e9,
        ),
        RealCheckpoint(
            "meta-llama/Llama-3.2-11B-Vision-Instruct",
            "mllama",
            "9eb2daaa8597bf192a8b0e73f848f3a102794df5",
            f"{_CACHE_PATHS} (others: 075e8feb…, cee5b78e…)",
            10.7e9,
            gated=True,
        ),
        RealCheckpoint(
            "OpenGVLab/InternVL3-2B-hf",
            "internvl",
            "cb57a075cb75a2e6d1b668b128d48bb00ae321d2",
            f"{_CACHE_PATHS} (one project)",
            2.09e9,
            video=True,
        ),
        RealCheckpoint(
            "mistralai/Mistral-Small-3.1-24B-Instruct-2503",
            "mistral3",
            "68faf511d618ef198fef186659617cfd2eb8e33a",
            f"{_CACHE_PATHS} (one other: 73ce7c62…)",
            24.0e9,
        ),
        RealCheckpoint(
            "microsoft/Phi-4-multimodal-instruct",
            "phi4_multimodal",
            None,
            "to pin: the Transformers-format files are on a pull-request ref, not main "
            "(main, 93f923e1…/0ae13bd0… in cache paths, is the remote-code layout)",
            # the card's 5.57B counts the vision and speech LoRA adapters, which the
            # Transformers format loads apart (PEFT): the base model is 4.74B
            4.74e9,
        ),
        RealCheckpoint(
            "zai-org/GLM-4.1V-9B-Thinking",
            "glm4v",
            None,
            "to pin: public code names it only through snapshots/*/",
            10.3e9,
            video=True,
        ),
        RealCheckpoint(
            "LiquidAI/LFM2-VL-1.6B",
            "lfm2_vl",
            None,
            "to pin: no commit of it appears in the stored public code",
            1.58e9,
        ),
        RealCheckpoint(
            "florence-community/Florence-2-base-ft",
            "florence2",
            "0b03b6f15a4a211370fb204aee4e7dd48887ea37",
            "MODEL_REVISION of a public project that pins it",
            0.232e9,
        ),
    )
}
"""Every reconstructed checkpoint by repository."""

_FILES: dict[str, dict[str, dict[str, Any]]] = {**CONFIGS_A, **CONFIGS_B}


def real_checkpoint_files(repository: str) -> dict[str, bytes]:
    """The reconstructed small files of ``repository``, plus a stub ``model.safetensors``.

    Raises:
        KeyError: ``repository`` is not reconstructed here.
    """
    files = {
        name: (json.dumps(content, indent=2, sort_keys=True) + "\n").encode("utf-8")
        for name, content in _FILES[repository].items()
    }
    header = b'{"__metadata__":{"format":"pt"}}'
    files["model.safetensors"] = len(header).to_bytes(8, "little") + header
    return files


def serve_real_checkpoint(hub: FakeHub, repository: str) -> str:
    """Add ``repository`` to ``hub`` at its commit, reporting the real safetensors size.

    For metadata only: the model info lists ``model.safetensors`` at the real
    size (with the stub's sha256), so the profiles and the picker see the
    real download; fetching it gets the stub, and a stager's size check
    fails, as it should.

    Returns:
        The commit sha (the real one where known, else one derived from the content).
    """
    entry = REAL_CHECKPOINTS[repository]
    sha = hub.add_repo(
        repository,
        real_checkpoint_files(repository),
        gated="manual" if entry.gated else False,
        sha=entry.revision,
    )
    stub = real_checkpoint_files(repository)["model.safetensors"]
    size = entry.weight_bytes
    lfs = {"sha256": hashlib.sha256(stub).hexdigest(), "size": size, "pointerSize": 134}
    hub.tamper(repository, sibling_fields={"model.safetensors": {"size": size, "lfs": lfs}})
    return sha
