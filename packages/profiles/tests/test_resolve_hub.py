"""Resolution against the fake Hub, through the real huggingface_hub client."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_core import ExecutionTarget, ProgressStage
from comfy_llm_profiles import resolve_profile
from comfy_llm_profiles._manifest import load_manifest
from comfy_llm_profiles.errors import (
    DownloadTooLargeError,
    HubAccessError,
    HubUnavailableError,
    InvalidConfigError,
    MissingConfigError,
    ModelNotFoundError,
    ModelRejectedError,
    RemoteCodeError,
    SecurityScanError,
    UnsafeWeightsError,
    UnsupportedArchitectureError,
    UnsupportedQuantizationError,
)

ConfigFactory = Callable[..., dict[str, Any]]
FilesFactory = Callable[..., dict[str, bytes]]
REPO = "owner/tiny-qwen"
CPU = ExecutionTarget.LOCAL_CPU
TOKEN = "hf_test_token"


def _resolve(
    hub: Any, reference: str, target: ExecutionTarget | str, root: Path, **kwargs: Any
) -> Any:
    kwargs.setdefault("endpoint", hub.endpoint)
    return resolve_profile(reference, target, storage_root=root, **kwargs)


def _no_weight_requests(hub: Any) -> None:
    for request in hub.requests:
        assert request.filename in (None, "config.json"), request
        assert "safetensors" not in request.path and ".bin" not in request.path


def _manifests(root: Path) -> list[str]:
    folder = root / "profiles"
    return sorted(n for n in os.listdir(folder) if n.endswith(".json")) if folder.exists() else []


# -- pinning -------------------------------------------------------------------------


def test_branch_is_pinned_to_its_commit(
    hf_env: Any, tmp_path: Path, make_config: ConfigFactory, make_files: FilesFactory
) -> None:
    first = hf_env.add_repo(REPO, make_files(make_config()))
    resolved = _resolve(hf_env, f"{REPO}@main", CPU, tmp_path)
    profile = resolved.profile
    assert profile.revision == first
    assert profile.requested_revision == "main"
    assert profile.repository == REPO
    assert resolved.manifest_path == tmp_path / "profiles" / f"{profile.profile_id}.json"
    assert resolved.created
    assert load_manifest(resolved.manifest_path) == profile

    # The default branch pins the same commit and, being the same identity, the same id.
    default = _resolve(hf_env, REPO, CPU, tmp_path)
    assert default.profile.revision == first
    assert default.profile.requested_revision is None
    assert default.profile.profile_id == profile.profile_id
    assert not default.created

    # Moving the branch gives a new pin and a new profile; the old manifest stays.
    second = hf_env.add_commit(REPO, make_files(make_config(), extra={"README.md": b"v2"}))
    moved = _resolve(hf_env, f"{REPO}@main", CPU, tmp_path)
    assert moved.profile.revision == second != first
    assert moved.profile.profile_id != profile.profile_id
    assert _manifests(tmp_path) == sorted(
        [f"{profile.profile_id}.json", f"{moved.profile.profile_id}.json"]
    )

    # A tag and an explicit commit pin to what they name.
    hf_env.add_tag(REPO, "v1", first)
    assert _resolve(hf_env, f"{REPO}@v1", CPU, tmp_path).profile.revision == first
    pinned = _resolve(hf_env, f"{REPO}@{first}", CPU, tmp_path)
    assert pinned.profile.revision == first
    assert pinned.profile.profile_id == profile.profile_id


def test_resolution_downloads_config_json_and_no_weight_file(
    hf_env: Any, tmp_path: Path, make_config: ConfigFactory, make_files: FilesFactory
) -> None:
    weights = {
        "model-00001-of-00002.safetensors": b"a" * 300,
        "model-00002-of-00002.safetensors": b"b" * 200,
    }
    sha = hf_env.add_repo(
        REPO,
        make_files(make_config(), weights=weights, extra={"model.safetensors.index.json": b"{}"}),
    )
    events: list[Any] = []
    resolved = _resolve(hf_env, REPO, ExecutionTarget.MODAL, tmp_path, progress=events.append)
    assert hf_env.file_requests("GET") == ["config.json"]
    assert set(hf_env.file_requests("HEAD")) <= {"config.json"}
    _no_weight_requests(hf_env)
    # config.json was fetched at the pinned commit, not at the moving branch.
    assert all(r.revision == sha for r in hf_env.requests if r.filename == "config.json")
    assert resolved.profile.weight_bytes == 500
    assert resolved.profile.backend == "vllm"
    assert resolved.profile.reasoning_parser == "qwen3"
    assert events and all(e.stage is ProgressStage.INSPECT and e.indeterminate for e in events)
    assert any(REPO in e.message for e in events)


def test_modal_profile_id_omits_the_target(
    hf_env: Any, tmp_path: Path, make_config: ConfigFactory, make_files: FilesFactory
) -> None:
    hf_env.add_repo(REPO, make_files(make_config()))
    modal = _resolve(hf_env, REPO, ExecutionTarget.MODAL, tmp_path).profile
    cuda = _resolve(
        hf_env, REPO, ExecutionTarget.LOCAL_CUDA, tmp_path, backends={"vllm", "transformers"}
    ).profile
    identity = modal.identity
    assert "execution_target" not in identity
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    assert modal.profile_id == "hf-" + hashlib.sha256(canonical.encode()).hexdigest()
    assert cuda.identity == {**identity, "execution_target": "local_cuda"}
    assert cuda.profile_id != modal.profile_id


def test_endpoint_comes_from_hf_endpoint_at_call_time(
    hf_env: Any, tmp_path: Path, make_config: ConfigFactory, make_files: FilesFactory
) -> None:
    hf_env.add_repo(REPO, make_files(make_config("smolvlm")))
    resolved = resolve_profile(REPO, CPU, storage_root=tmp_path)  # no endpoint= here
    assert resolved.profile.architecture == "SmolVLMForConditionalGeneration"
    assert hf_env.file_requests("GET") == ["config.json"]


def test_cache_dir_keeps_config_json(
    hf_env: Any, tmp_path: Path, make_config: ConfigFactory, make_files: FilesFactory
) -> None:
    hf_env.add_repo(REPO, make_files(make_config()))
    cache = tmp_path / "cache"
    _resolve(hf_env, REPO, CPU, tmp_path / "root", cache_dir=cache)
    cached = list(cache.rglob("config.json"))
    assert len(cached) == 1
    assert not list(cache.rglob("*.safetensors"))


# -- access --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "where"),
    [
        (ExecutionTarget.LOCAL_CPU, "environment that launches ComfyUI"),
        (ExecutionTarget.LOCAL_APPLE, "environment that launches ComfyUI"),
        (ExecutionTarget.MODAL, "Modal secret"),
    ],
)
def test_gated_without_token_says_where_the_token_goes(
    hf_env: Any,
    tmp_path: Path,
    make_config: ConfigFactory,
    make_files: FilesFactory,
    target: ExecutionTarget,
    where: str,
) -> None:
    hf_env.add_repo(REPO, make_files(make_config()), gated="manual")
    with pytest.raises(HubAccessError) as caught:
        _resolve(hf_env, REPO, target, tmp_path)
    error = caught.value
    assert isinstance(error, PermissionError)
    assert (error.repository, error.kind, error.token_provided) == (REPO, "gated", False)
    message = str(error)
    assert REPO in message and "gated" in message and "HF_TOKEN" in message and where in message
    _no_weight_requests(hf_env)
    assert _manifests(tmp_path) == []


def test_gated_with_token(
    hf_env: Any,
    tmp_path: Path,
    make_config: ConfigFactory,
    make_files: FilesFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sha = hf_env.add_repo(REPO, make_files(make_config()), gated="auto")
    by_argument = _resolve(hf_env, REPO, CPU, tmp_path, token=TOKEN)
    assert by_argument.profile.revision == sha
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    assert _resolve(hf_env, REPO, CPU, tmp_path).profile == by_argument.profile
    monkeypatch.delenv("HF_TOKEN")
    monkeypatch.setenv("HUGGING_FACE_HUB_TOKEN", TOKEN)
    assert _resolve(hf_env, REPO, CPU, tmp_path).profile == by_argument.profile
    sent = [r.headers.get("authorization") for r in hf_env.requests]
    assert sent and all(value == f"Bearer {TOKEN}" for value in sent)
    _no_weight_requests(hf_env)


def test_gated_with_a_wrong_token(
    hf_env: Any, tmp_path: Path, make_config: ConfigFactory, make_files: FilesFactory
) -> None:
    hf_env.add_repo(REPO, make_files(make_config()), gated="auto")
    with pytest.raises(HubAccessError) as caught:
        _resolve(hf_env, REPO, ExecutionTarget.MODAL, tmp_path, token="hf_wrong")
    assert caught.value.token_provided
    assert "no access" in str(caught.value) and "Modal secret" in str(caught.value)


def test_private_repo_needs_a_token(
    hf_env: Any, tmp_path: Path, make_config: ConfigFactory, make_files: FilesFactory
) -> None:
    hf_env.add_repo(REPO, make_files(make_config()), private=True)
    with pytest.raises(ModelNotFoundError) as caught:
        _resolve(hf_env, REPO, CPU, tmp_path)
    assert "private" in str(caught.value) and "HF_TOKEN" in str(caught.value)
    assert _resolve(hf_env, REPO, CPU, tmp_path, token=TOKEN).profile.repository == REPO


def test_missing_repo_and_missing_revision_are_distinct(
    hf_env: Any, tmp_path: Path, make_config: ConfigFactory, make_files: FilesFactory
) -> None:
    hf_env.add_repo(REPO, make_files(make_config()))
    with pytest.raises(ModelNotFoundError) as missing_repo:
        _resolve(hf_env, "owner/does-not-exist", CPU, tmp_path)
    with pytest.raises(ModelNotFoundError) as missing_rev:
        _resolve(hf_env, f"{REPO}@no-such-branch", CPU, tmp_path)
    repo_error, rev_error = missing_repo.value, missing_rev.value
    assert isinstance(repo_error, LookupError) and isinstance(rev_error, LookupError)
    assert (repo_error.kind, rev_error.kind) == ("repo_not_found", "revision_not_found")
    assert repo_error.repository == "owner/does-not-exist"
    assert (rev_error.repository, rev_error.revision) == (REPO, "no-such-branch")
    assert "'owner/does-not-exist' was not found" in str(repo_error)
    assert "Revision 'no-such-branch' was not found" in str(rev_error)
    assert "repository itself exists" in str(rev_error)
    assert str(repo_error) != str(rev_error)
    missing_commit = "f" * 40
    with pytest.raises(ModelNotFoundError) as missing_pin:
        _resolve(hf_env, f"{REPO}@{missing_commit}", CPU, tmp_path)
    assert missing_pin.value.kind == "revision_not_found"
    assert _manifests(tmp_path) == []


def test_unreachable_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    with pytest.raises(HubUnavailableError) as caught:
        resolve_profile(REPO, CPU, storage_root=tmp_path, endpoint="http://127.0.0.1:9")
    assert isinstance(caught.value, ConnectionError)
    assert caught.value.endpoint == "http://127.0.0.1:9"
    assert "HF_ENDPOINT" in str(caught.value)


def test_hub_server_error(
    hf_env: Any, tmp_path: Path, make_config: ConfigFactory, make_files: FilesFactory
) -> None:
    hf_env.add_repo(REPO, make_files(make_config()))
    hf_env.inject_fault("GET", f"/api/models/{REPO}", status=500)
    with pytest.raises(HubUnavailableError, match="500"):
        _resolve(hf_env, REPO, CPU, tmp_path)


# -- refusals (section 4) ----------------------------------------------------------------


def _refusal_cases(config: ConfigFactory, files: FilesFactory) -> dict[str, Any]:
    return {
        "no config.json": (files(None), {}, MissingConfigError, "no config.json", False),
        "pickle only": (
            files(config(), weights={"pytorch_model.bin": b"x" * 10, "extra.pt": b"y"}),
            {},
            UnsafeWeightsError,
            "pytorch_model.bin",
            False,
        ),
        "no weights at all": (
            files(config(), weights={}),
            {},
            UnsafeWeightsError,
            "no weight files",
            False,
        ),
        "over the download limit": (
            files(config(), weights={"model.safetensors": b"z" * (2 * 1024**2)}),
            {"COMFY_MODAL_LLM_MAX_DOWNLOAD_GB": "0.001"},
            DownloadTooLargeError,
            "COMFY_MODAL_LLM_MAX_DOWNLOAD_GB",
            False,
        ),
        "security findings": ("findings", {}, SecurityScanError, "security scan", False),
        "auto_map": (
            files(config(auto_map={"AutoModel": "modeling_x.Model"})),
            {},
            RemoteCodeError,
            "auto_map",
            True,
        ),
        "custom architecture": (
            files(config(architectures=["TotallyCustomVLM"], model_type="custom_vlm")),
            {},
            RemoteCodeError,
            "custom architecture",
            True,
        ),
        "architecture not for the target": (
            files(
                config(
                    architectures=["Qwen3_5MoeForConditionalGeneration"], model_type="qwen3_5_moe"
                )
            ),
            {},
            UnsupportedArchitectureError,
            "not supported on target",
            True,
        ),
        "quantization not for the target": (
            files(
                config(quantization_config={"quant_method": "fp8", "weight_block_size": [128, 128]})
            ),
            {},
            UnsupportedQuantizationError,
            "not allowed",
            True,
        ),
        "unknown quantization": (
            files(config(quantization_config={"quant_method": "gptq"})),
            {},
            UnsupportedQuantizationError,
            "unknown (gptq)",
            True,
        ),
        "config not JSON": (
            files(None, extra={"config.json": b"{oops"}),
            {},
            InvalidConfigError,
            "not valid JSON",
            True,
        ),
    }


REFUSALS = [
    "no config.json",
    "pickle only",
    "no weights at all",
    "over the download limit",
    "security findings",
    "auto_map",
    "custom architecture",
    "architecture not for the target",
    "quantization not for the target",
    "unknown quantization",
    "config not JSON",
]


@pytest.mark.parametrize("case", REFUSALS)
def test_each_refusal_happens_before_any_weight_byte(
    hf_env: Any,
    tmp_path: Path,
    make_config: ConfigFactory,
    make_files: FilesFactory,
    monkeypatch: pytest.MonkeyPatch,
    case: str,
) -> None:
    files, env, error_class, text, reads_config = _refusal_cases(make_config, make_files)[case]
    if files == "findings":
        sha = hf_env.add_repo(
            REPO, make_files(make_config()), security_findings=["model.safetensors"]
        )
    else:
        sha = hf_env.add_repo(REPO, files)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(error_class) as caught:
        _resolve(hf_env, REPO, CPU, tmp_path)
    error = caught.value
    assert isinstance(error, ModelRejectedError)
    assert (error.repository, error.revision, error.target) == (REPO, sha, "local_cpu")
    message = str(error)
    assert text in message and REPO in message
    assert hf_env.file_requests("GET") == (["config.json"] if reads_config else [])
    _no_weight_requests(hf_env)
    assert _manifests(tmp_path) == []


def test_refusal_attributes(
    hf_env: Any,
    tmp_path: Path,
    make_config: ConfigFactory,
    make_files: FilesFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hf_env.add_repo(
        "owner/big", make_files(make_config(), weights={"model.safetensors": b"z" * (2 * 1024**2)})
    )
    hf_env.add_repo(
        "owner/flagged",
        make_files(make_config()),
        security_findings=["model.safetensors", "tokenizer.json"],
    )
    hf_env.add_repo("owner/pickled", make_files(make_config(), weights={"model.bin": b"x"}))
    monkeypatch.setenv("COMFY_MODAL_LLM_MAX_DOWNLOAD_GB", "0.001")
    with pytest.raises(DownloadTooLargeError) as too_large:
        _resolve(hf_env, "owner/big", CPU, tmp_path)
    assert too_large.value.size_bytes == 2 * 1024**2
    assert too_large.value.limit_bytes == int(0.001 * 1024**3)
    with pytest.raises(SecurityScanError) as flagged:
        _resolve(hf_env, "owner/flagged", CPU, tmp_path)
    assert flagged.value.findings == ("model.safetensors (unsafe)", "tokenizer.json (unsafe)")
    with pytest.raises(UnsafeWeightsError) as pickled:
        _resolve(hf_env, "owner/pickled", CPU, tmp_path)
    assert pickled.value.weight_files == ("model.bin",)
    assert "safetensors" in str(pickled.value)


def test_apple_refuses_fp8_and_accepts_mlx(
    hf_env: Any, tmp_path: Path, make_config: ConfigFactory, make_files: FilesFactory
) -> None:
    hf_env.add_repo(
        "owner/qwen-fp8",
        make_files(
            make_config(
                quantization_config={"quant_method": "fp8", "weight_block_size": [128, 128]}
            )
        ),
    )
    hf_env.add_repo(
        "mlx-community/qwen-4bit",
        make_files(make_config(quantization={"group_size": 64, "bits": 4})),
    )
    with pytest.raises(UnsupportedQuantizationError, match="mlx-community"):
        _resolve(hf_env, "owner/qwen-fp8", ExecutionTarget.LOCAL_APPLE, tmp_path)
    apple = _resolve(hf_env, "mlx-community/qwen-4bit", ExecutionTarget.LOCAL_APPLE, tmp_path)
    assert (apple.profile.backend, apple.profile.quantization_method) == ("mlx_vlm", "mlx")
    modal = _resolve(hf_env, "owner/qwen-fp8", ExecutionTarget.MODAL, tmp_path)
    assert (modal.profile.backend, modal.profile.quantization_method) == ("vllm", "fp8")


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["qwen3_5", "smolvlm"])
def test_test_world_checkpoints_resolve_on_every_target(
    hf_env: Any, tmp_path: Path, kind: str
) -> None:
    from comfy_llm_testworld.checkpoints import build_checkpoint_files

    files = build_checkpoint_files(kind)  # type: ignore[arg-type]
    sha = hf_env.add_repo(f"tiny/{kind}", files)
    weight = sum(len(v) for k, v in files.items() if k.endswith(".safetensors"))
    for target in ExecutionTarget:
        profile = _resolve(
            hf_env, f"tiny/{kind}", target, tmp_path, backends={"mlx_vlm", "transformers", "vllm"}
        ).profile
        assert (profile.revision, profile.weight_bytes) == (sha, weight)
        assert profile.reasoning_parser == ("qwen3" if kind == "qwen3_5" else "none")
    assert set(hf_env.file_requests("GET")) == {"config.json"}
    _no_weight_requests(hf_env)
    assert len(_manifests(tmp_path)) == len(ExecutionTarget)
