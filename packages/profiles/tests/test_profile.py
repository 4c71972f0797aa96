from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from typing import Any

import pytest
from comfy_llm_core import ExecutionTarget
from comfy_llm_profiles import ModelProfile
from comfy_llm_profiles._profile import ProfileLimits, compute_profile_id, estimated_vram_gb
from comfy_llm_profiles.errors import ProfileValidationError

MakeProfile = Callable[..., ModelProfile]

# The id of conftest.build_profile(): pinned so that any change to the
# identity's shape or canonical JSON (which would orphan every existing
# manifest and Modal profile) fails loudly here.
GOLDEN_LOCAL_CPU_ID = "hf-68046a0f1510e166d87c8a7978566d49240516af30ec6af12d6322b813c20f4e"


def _seed_id(identity: dict[str, Any]) -> str:
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return "hf-" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _seed_identity(**changes: Any) -> dict[str, Any]:
    """The seed's identity of conftest.build_profile(), written out field by field."""
    identity = {
        "schema_version": 2,
        "compatibility_policy_version": 1,
        "repository": "owner/model",
        "revision": "0123456789abcdef0123456789abcdef01234567",
        "dtype": "bfloat16",
        "modalities": ["file", "image", "text", "video"],
        "backend": "transformers",
        "architecture": "SmolVLMForConditionalGeneration",
        "quantization_method": "none",
        "artifact_bytes": 1000,
        "advertised_context_tokens": 8192,
        "max_context_tokens": 8192,
        "estimated_vram_gb": 8.0,  # round(1000 B in GiB x 1.08 + 8, 1)
        "reasoning_parser": "none",
        "backend_options": {"device": "cpu", "torch_dtype": "float32"},
        "runtime_requirements": ["transformers==5.24.0"],
    }
    identity.update(changes)
    return identity


def test_modal_id_is_the_seeds_field_for_field(make_profile: MakeProfile) -> None:
    modal = make_profile(execution_target=ExecutionTarget.MODAL)
    assert modal.identity == _seed_identity()
    assert modal.profile_id == _seed_id(_seed_identity())
    # The target is still recorded in the profile and its dict, just not hashed.
    assert modal.to_dict()["execution_target"] == "modal"


def test_other_targets_add_execution_target(make_profile: MakeProfile) -> None:
    profile = make_profile()
    expected = _seed_identity(execution_target="local_cpu")
    assert profile.identity == expected
    assert profile.profile_id == _seed_id(expected)


def test_profile_id_is_stable(make_profile: MakeProfile) -> None:
    assert make_profile().profile_id == GOLDEN_LOCAL_CPU_ID


@pytest.mark.parametrize(
    ("artifact_bytes", "method", "backend", "expected"),
    [
        (10 * 1024**3, "fp8", "vllm", 23.2),  # 10 x 1.12 + 12
        (3 * 1024**3, "none", "vllm", 15.2),  # 3 x 1.08 + 12 = 15.24
        (4 * 1024**3, "none", "transformers", 12.3),  # 4.32 + 8
        (int(1.5 * 1024**3), "mlx", "mlx_vlm", 3.7),  # 1.68 + 2
        (0, "none", "mlx_vlm", 2.0),
    ],
)
def test_estimated_vram_gb_formula(
    artifact_bytes: int, method: str, backend: str, expected: float
) -> None:
    assert estimated_vram_gb(artifact_bytes, method, backend) == expected


def test_local_targets_are_part_of_the_identity(make_profile: MakeProfile) -> None:
    ids = {make_profile(execution_target=t).profile_id for t in ExecutionTarget}
    assert len(ids) == len(ExecutionTarget)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("requested_revision", None),
        ("requested_revision", "v2"),
        ("display_name", "Another label"),
        # Recorded, but (as in the seed's identity) not hashed:
        ("model_type", "idefics3"),
        ("estimated_memory_bytes", 1),
        ("registry_version", "local_cpu/other"),
    ],
)
def test_non_identity_fields_keep_the_id(
    make_profile: MakeProfile, field: str, value: object
) -> None:
    assert make_profile(**{field: value}).profile_id == make_profile().profile_id


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("repository", "owner/other"),
        ("revision", "f" * 40),
        ("backend", "vllm"),
        ("architecture", "Idefics3ForConditionalGeneration"),
        ("dtype", "float16"),
        ("quantization_method", "fp8"),
        ("modalities", ("text", "image")),
        ("reasoning_parser", "qwen3"),
        ("reasoning_parser", None),
        ("backend_options", (("device", "cuda"),)),
        ("weight_bytes", 1001),
        ("weight_bytes", 2 * 1024**3),  # also moves estimated_vram_gb
        ("advertised_context_tokens", 4096),
        ("advertised_context_tokens", None),
        ("runtime_requirements", ("transformers==5.19.0",)),
    ],
)
def test_identity_fields_change_the_id(
    make_profile: MakeProfile, field: str, value: object
) -> None:
    assert make_profile(**{field: value}).profile_id != make_profile().profile_id


def test_only_the_context_limit_is_identity(make_profile: MakeProfile) -> None:
    base = make_profile()
    context = make_profile(limits=dataclasses.replace(base.limits, context_tokens=4096))
    assert context.profile_id != base.profile_id
    assert context.identity["max_context_tokens"] == 4096
    bounds = make_profile(limits=ProfileLimits.of(**{**base.limits.to_dict(), "max_images": 5}))
    assert bounds.profile_id == base.profile_id


def test_backend_options_are_sorted_and_hashable(make_profile: MakeProfile) -> None:
    a = make_profile(backend_options={"torch_dtype": "float32", "device": "cpu"})
    b = make_profile(backend_options=(("torch_dtype", "float32"), ("device", "cpu")))
    assert a.backend_options == (("device", "cpu"), ("torch_dtype", "float32"))
    assert a == b
    assert a.profile_id == b.profile_id
    assert len({a, b}) == 1
    assert a.options == {"device": "cpu", "torch_dtype": "float32"}


def test_profile_is_frozen(make_profile: MakeProfile) -> None:
    profile = make_profile()
    with pytest.raises(dataclasses.FrozenInstanceError):
        profile.revision = "f" * 40  # type: ignore[misc]


def test_dict_round_trip_through_json(make_profile: MakeProfile) -> None:
    for target in ExecutionTarget:
        profile = make_profile(execution_target=target)
        data = json.loads(json.dumps(profile.to_dict()))
        assert ModelProfile.from_dict(data) == profile
    assert ModelProfile.from_dict(make_profile().to_dict()).profile_id == GOLDEN_LOCAL_CPU_ID


def test_from_dict_keeps_the_non_identity_fields(make_profile: MakeProfile) -> None:
    data = make_profile().to_dict()
    data["requested_revision"] = "v9"
    data["display_name"] = "Changed"
    profile = ModelProfile.from_dict(data)
    assert (profile.requested_revision, profile.display_name) == ("v9", "Changed")


def _tampered(make_profile: MakeProfile, **changes: object) -> dict[str, Any]:
    data = make_profile().to_dict()
    data.update(changes)
    return data


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"weight_bytes": 999}, "profile_id"),
        ({"backend_options": {"device": "cuda", "torch_dtype": "float32"}}, "profile_id"),
        ({"profile_id": "hf-" + "0" * 64}, "profile_id"),
        ({"revision": "main"}, "revision"),
        ({"revision": "0123456789ABCDEF0123456789ABCDEF01234567"}, "revision"),
        ({"revision": "abc"}, "revision"),
        ({"schema_version": 1}, "schema_version"),
        ({"schema_version": 3}, "schema_version"),
        ({"execution_target": "local_tpu"}, "execution_target"),
        ({"backend": "llama_server"}, "backend"),
        ({"quantization_method": "awq"}, "quantization_method"),
        ({"reasoning_parser": "deepseek"}, "reasoning_parser"),
        ({"modalities": ["image"]}, "modalities"),
        ({"modalities": ["text", "audio"]}, "modalities"),
        ({"modalities": "text"}, "modalities"),
        ({"estimated_memory_bytes": 0}, "estimated_memory_bytes"),
        ({"weight_bytes": -1}, "weight_bytes"),
        ({"weight_bytes": True}, "weight_bytes"),
        ({"backend_options": {"device": ["cpu"]}}, "backend_options.device"),
        ({"backend_options": {"x": float("nan")}}, "backend_options.x"),
        ({"backend_options": [["device", "cpu"]]}, "backend_options"),
        ({"limits": {"context_tokens": 1}}, "limits"),
        ({"limits": "big"}, "limits"),
        ({"repository": "no-slash"}, "repository"),
        ({"architecture": ""}, "architecture"),
        ({"extra": 1}, "profile"),
        ({"profile_id": ""}, "profile_id"),
    ],
)
def test_from_dict_refuses_invalid_dicts(
    make_profile: MakeProfile, changes: dict[str, object], field: str
) -> None:
    with pytest.raises(ProfileValidationError) as caught:
        ModelProfile.from_dict(_tampered(make_profile, **changes))
    assert caught.value.field == field
    assert isinstance(caught.value, ValueError)
    assert "Re-resolve" in str(caught.value)


def test_from_dict_refuses_missing_keys(make_profile: MakeProfile) -> None:
    data = make_profile().to_dict()
    del data["backend"]
    with pytest.raises(ProfileValidationError, match="missing \\['backend'\\]"):
        ModelProfile.from_dict(data)
    with pytest.raises(ProfileValidationError):
        ModelProfile.from_dict(["not", "a", "dict"])  # type: ignore[arg-type]


def test_constructor_checks_a_given_profile_id(make_profile: MakeProfile) -> None:
    good = make_profile()
    assert make_profile(profile_id=good.profile_id) == good
    with pytest.raises(ProfileValidationError, match="digest of its identity"):
        make_profile(profile_id="hf-" + "1" * 64)


def test_target_given_as_text_is_normalized(make_profile: MakeProfile) -> None:
    profile = make_profile(execution_target="modal")
    assert profile.execution_target is ExecutionTarget.MODAL


def test_limits_validation() -> None:
    good = {
        "context_tokens": 1,
        "max_images": 0,
        "max_video_frames": 0,
        "max_file_bytes": 1,
        "max_total_file_bytes": 1,
        "max_file_characters": 1,
        "max_pdf_pages": 0,
        "allow_mixed_image_video": True,
    }
    assert ProfileLimits.from_dict(good).to_dict() == good
    for key, bad in [
        ("context_tokens", 0),
        ("max_images", -1),
        ("max_pdf_pages", 1.5),
        ("allow_mixed_image_video", 1),
    ]:
        with pytest.raises(ProfileValidationError) as caught:
            ProfileLimits.from_dict({**good, key: bad})
        assert caught.value.field == f"limits.{key}"


def test_compute_profile_id_ignores_non_identity_keys(make_profile: MakeProfile) -> None:
    data = make_profile().to_dict()
    data["display_name"] = "x"
    data["profile_id"] = "whatever"
    assert compute_profile_id(data) == GOLDEN_LOCAL_CPU_ID


def test_the_flat_limit_keys_come_from_cores_bounds_records() -> None:
    """A modality's bounds are data (issue 28): profiles spell, zero and check them by record.

    Each core record names the bounds a profile stores and the one counting its inputs;
    a model without the modality gets that count zeroed, and nothing in profiles names
    a modality's bound by hand.
    """
    from comfy_llm_core import MediaLimits, Modality
    from comfy_llm_profiles._profile import COUNT_BOUNDS, LIMIT_KEYS

    records = MediaLimits.records()
    stored = [key for record in records.values() for key in record.profile_bounds]
    assert ("context_tokens", *stored) == LIMIT_KEYS
    assert COUNT_BOUNDS == {Modality.IMAGE: "max_images", Modality.VIDEO: "max_video_frames"}
    assert MediaLimits.of({Modality.IMAGE: {"max_images": 2}})[Modality.IMAGE].max_images == 2
    limits = ProfileLimits.of(context_tokens=4096, max_images=4, max_video_frames=16)
    text_and_images = limits.for_modalities(("text", "image", "file"))
    assert text_and_images.media.image.max_images == 4
    assert text_and_images.media.video.max_video_frames == 0
    assert limits.for_modalities(("text", "image", "video", "file")) is limits
