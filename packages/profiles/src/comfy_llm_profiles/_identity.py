"""The profile id: the seed system's identity shape, hashed.

``profile_id = "hf-" + sha256`` of the canonical JSON (``sort_keys=True``,
separators ``(",", ":")``, UTF-8) of the identity built here from a profile
dict (see ``_profile`` for the fields and what is left out).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Final

from comfy_llm_core import ExecutionTarget

from comfy_llm_profiles._engines import ENGINES

__all__ = [
    "COMPATIBILITY_POLICY_VERSION",
    "PROFILE_ID_PREFIX",
    "compute_profile_id",
    "estimated_vram_gb",
    "identity_of",
]

COMPATIBILITY_POLICY_VERSION: Final = 1
PROFILE_ID_PREFIX: Final = "hf-"
_GIB = 1024**3


def _canonical(data: Mapping[str, Any]) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False).encode("utf-8")


def estimated_vram_gb(artifact_bytes: int, quantization_method: str, backend: str) -> float:
    """The seed's identity figure: ``round(GiB x (1.12 if quantized else 1.08) + overhead, 1)``.

    Args:
        artifact_bytes: Total safetensors bytes.
        quantization_method: ``none`` or a quantization method.
        backend: An engine name; its ``vram_overhead_gb`` is added (vllm 12,
            transformers 8, mlx_vlm 2).

    Raises:
        KeyError: ``backend`` is not an engine.
    """
    factor = 1.08 if quantization_method == "none" else 1.12
    return round(artifact_bytes / _GIB * factor + ENGINES[backend].vram_overhead_gb, 1)


def identity_of(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The hashed identity of a dict shaped like ``ModelProfile.to_dict()`` output."""
    limits = fields["limits"]
    identity = {
        "schema_version": fields["schema_version"],
        "compatibility_policy_version": COMPATIBILITY_POLICY_VERSION,
        "repository": fields["repository"],
        "revision": fields["revision"],
        "dtype": fields["dtype"],
        "modalities": sorted(fields["modalities"]),
        "backend": fields["backend"],
        "architecture": fields["architecture"],
        "quantization_method": fields["quantization_method"],
        "artifact_bytes": fields["weight_bytes"],
        "advertised_context_tokens": fields["advertised_context_tokens"],
        "max_context_tokens": limits["context_tokens"],
        "estimated_vram_gb": estimated_vram_gb(
            fields["weight_bytes"], fields["quantization_method"], fields["backend"]
        ),
        "reasoning_parser": fields["reasoning_parser"],
        "backend_options": dict(fields["backend_options"]),
        "runtime_requirements": list(fields["runtime_requirements"]),
    }
    if fields.get("source", "hub") != "hub":
        # A local folder: its content pin is the revision, and where it lies is part of
        # what the profile names (Hub ids keep the seed's shape: no source key).
        identity["source"] = fields["source"]
        identity["local_path"] = fields["local_path"]
    if fields["execution_target"] != ExecutionTarget.MODAL.value:
        # The seed's Modal ids never hashed their target; every other target does.
        identity["execution_target"] = fields["execution_target"]
    return identity


def compute_profile_id(profile_dict: Mapping[str, Any]) -> str:
    """Return ``hf-<sha256>`` of the identity of a profile dict (module docstring).

    Args:
        profile_dict: A dict shaped like :meth:`ModelProfile.to_dict` output;
            non-identity keys are ignored.

    Returns:
        The content-addressed profile id.

    Raises:
        KeyError: An identity key is missing or the backend is unknown.
    """
    return PROFILE_ID_PREFIX + hashlib.sha256(_canonical(identity_of(profile_dict))).hexdigest()
