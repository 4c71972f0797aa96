"""Every decision the registries make today, pinned: ids, metadata values and refusals.

Saved workflows and pinned manifests name profiles by id, and a profile's
recorded values (limits, options, memory estimate, registry version) reach
the node's metadata. Any refactor of how engines and families are declared
must leave all of them unchanged, so each case below — every reviewed
architecture, every target, every quantization, with and without vLLM —
is compared with ``golden_decisions.json``: the profile id and a digest of
the whole ``to_dict()``, or the refusal's class and a digest of its message. A deliberate
change regenerates the file (``COMFY_LLM_REGENERATE_GOLDEN=1``) and says why
in its commit.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from comfy_llm_core import ExecutionTarget, install_command
from comfy_llm_profiles import ProfileError, decide

from .conftest import build_config  # type: ignore[import-not-found]

GOLDEN = Path(__file__).with_name("golden_decisions.json")
SHA = "0123456789abcdef0123456789abcdef01234567"
PIN = "ab" * 32
GIB = 1024**3

_MOE = {
    "qwen3_5_moe": ("qwen3_5", "Qwen3_5MoeForConditionalGeneration", "qwen3_5_moe"),
    "qwen3_vl_moe": ("qwen3_vl", "Qwen3VLMoeForConditionalGeneration", "qwen3_vl_moe"),
}
_QUANTIZATIONS: dict[str, dict[str, Any]] = {
    "none": {},
    "fp8": {"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}},
    "nvfp4": {"quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4"}},
    "mlx": {"quantization": {"group_size": 64, "bits": 4}},
    "awq": {"quantization_config": {"quant_method": "awq"}},
}
_BACKENDS = {
    "all": frozenset({"mlx_vlm", "transformers", "vllm"}),
    "no_vllm": frozenset({"mlx_vlm", "transformers"}),
}


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _portable(message: str) -> str:
    """The message with install commands as placeholders.

    An install command names this checkout's interpreter or clone (what works
    from here), so the digest would differ per checkout; its wording is
    comfy_llm_core.install_command's own tests' concern.
    """
    for extra in ("apple", "cuda", "vllm", "modal", "llamacpp", "bitsandbytes"):
        message = message.replace(install_command(extra), f"<install {extra}>")
    return message


def _config(name: str, quantization: str) -> dict[str, Any]:
    if name in _MOE:
        base, architecture, model_type = _MOE[name]
        config = build_config(base, architectures=[architecture], model_type=model_type)
    else:
        config = build_config(name)
    config.update(_QUANTIZATIONS[quantization])
    return config


def _outcome(target: ExecutionTarget, config: dict[str, Any], **kwargs: Any) -> Any:
    local = kwargs.pop("local", False)
    try:
        decision = decide(
            target, config, repository="owner/model", revision=SHA, weight_bytes=3 * GIB, **kwargs
        )
    except ProfileError as error:
        return {"refused": type(error).__name__, "message_sha256": _digest(_portable(str(error)))}
    profile = (
        decision.to_profile("local/model", PIN, local_path="/models/model")
        if local
        else decision.to_profile("owner/model", SHA, requested_revision="main")
    )
    canonical = json.dumps(profile.to_dict(), sort_keys=True, separators=(",", ":"))
    return {
        "profile_id": profile.profile_id,
        "backend": profile.backend,
        "family": decision.family,
        "profile_sha256": _digest(canonical),
    }


def _cases() -> dict[str, Any]:
    names = ["qwen3_5", "qwen3_vl", "smolvlm", "idefics3", "muse_glimmer", *_MOE]
    names += ["qwen2_vl", "qwen2_5_vl", "gemma3", "llava", "joycaption", "llava_next"]
    names += ["mllama", "internvl", "mistral3", "glm4v", "lfm2_vl"]
    names += ["phi4_multimodal", "florence2"]
    cases: dict[str, Any] = {}
    for target in ExecutionTarget:
        for name in names:
            for quantization in _QUANTIZATIONS:
                for usable, backends in _BACKENDS.items():
                    key = f"{target.value}/{name}/{quantization}/{usable}"
                    cases[key] = _outcome(target, _config(name, quantization), backends=backends)
        # a curated entry's reviewed limits, and a local folder used in place
        reviewed = {"context_tokens": 16384, "max_images": 8, "allow_mixed_image_video": False}
        cases[f"{target.value}/smolvlm/reviewed-limits"] = _outcome(
            target, _config("smolvlm", "none"), backends=_BACKENDS["all"], limit_overrides=reviewed
        )
        cases[f"{target.value}/qwen3_5/local"] = _outcome(
            target, _config("qwen3_5", "none"), backends=_BACKENDS["all"], local=True
        )
        unreviewed = build_config(
            "smolvlm", architectures=["PaliGemmaForConditionalGeneration"], model_type="paligemma"
        )
        cases[f"{target.value}/unreviewed"] = _outcome(
            target, unreviewed, backends=_BACKENDS["all"]
        )
        remote = build_config("smolvlm", auto_map={"AutoModel": "custom.Model"})
        cases[f"{target.value}/remote-code"] = _outcome(target, remote, backends=_BACKENDS["all"])
        # quantized at load (owner/model:nf4, :int8): issue 30's bitsandbytes
        for name in ("qwen3_5", "smolvlm", "gemma3"):
            for format_ in ("none", "fp8"):
                for load in ("bnb_int8", "bnb_nf4"):
                    key = f"{target.value}/{name}/{format_}+{load}"
                    config = _config(name, format_)
                    cases[key] = _outcome(
                        target, config, backends=_BACKENDS["all"], load_quantization=load
                    )
    return cases


def test_every_decision_is_what_it_was() -> None:
    cases = _cases()
    if os.environ.get("COMFY_LLM_REGENERATE_GOLDEN") == "1":
        GOLDEN.write_text(json.dumps(cases, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert sorted(cases) == sorted(golden)
    changed = [key for key in sorted(cases) if cases[key] != golden[key]]
    assert not changed, f"{len(changed)} decisions changed, e.g. {changed[:3]}"
