"""Layout, validation, storage root, allow-list and error contracts (no network)."""

from __future__ import annotations

import fnmatch
import hashlib
import pickle
from pathlib import Path

import comfy_llm_staging as staging
import pytest
from comfy_llm_core import InvalidSettingError
from comfy_llm_staging import (
    ALLOW_PATTERNS,
    IGNORE_PATTERNS,
    InsufficientDiskSpaceError,
    InvalidRepositoryError,
    InvalidRevisionError,
    SnapshotVerificationError,
    StagingError,
    StagingLeaseTimeoutError,
    _settings,
    default_storage_root,
    snapshot_path,
    stage_snapshot,
)

SHA = "0123456789abcdef0123456789abcdef01234567"


def test_snapshot_path_is_keyed_by_repository_and_revision_only(tmp_path: Path) -> None:
    path = snapshot_path(tmp_path, "owner/model", SHA)
    digest = hashlib.sha256(b"owner/model").hexdigest()
    assert path == tmp_path / "llm_models" / f"repo-{digest}" / SHA
    assert snapshot_path(tmp_path, "owner/model", SHA) == path
    assert snapshot_path(tmp_path, "owner/other", SHA) != path


@pytest.mark.parametrize("revision", ["main", "v1.0", SHA[:39], SHA.upper(), SHA + "0", "", None])
def test_revision_must_be_a_pinned_commit(tmp_path: Path, revision: object) -> None:
    with pytest.raises(InvalidRevisionError) as caught:
        snapshot_path(tmp_path, "owner/model", revision)  # type: ignore[arg-type]
    assert isinstance(caught.value, ValueError)
    assert "40-character" in str(caught.value)


@pytest.mark.parametrize(
    "repository", ["model", "a/b/c", "../x", "owner/..", "owner/ model", "", "/abs", None]
)
def test_repository_must_be_owner_slash_name(tmp_path: Path, repository: object) -> None:
    with pytest.raises(InvalidRepositoryError) as caught:
        snapshot_path(tmp_path, repository, SHA)  # type: ignore[arg-type]
    assert isinstance(caught.value, ValueError)


def test_stage_refuses_a_branch_before_any_request(hf_env, tmp_path: Path) -> None:
    hf_env.add_repo("owner/model", {"config.json": b"{}"})
    with pytest.raises(InvalidRevisionError, match="only pinned revisions"):
        stage_snapshot("owner/model", "main", storage_root=tmp_path)
    assert hf_env.requests == []
    assert not (tmp_path / "llm_models").exists()


def test_storage_root_env_wins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("COMFY_MODAL_LOCAL_LLM_STORAGE_ROOT", str(tmp_path / "env"))
    assert default_storage_root(tmp_path / "models") == tmp_path / "env"


def test_storage_root_follows_comfyui_models_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("COMFY_MODAL_LOCAL_LLM_STORAGE_ROOT", raising=False)
    assert default_storage_root(tmp_path / "models") == tmp_path / "models" / "modal_llm"


@pytest.mark.parametrize(
    ("platform", "env", "expected"),
    [
        ("linux", {"XDG_CACHE_HOME": "/xdg"}, Path("/xdg/comfy-llm")),
        ("linux", {}, Path("HOME/.cache/comfy-llm")),
        ("linux", {"XDG_CACHE_HOME": "relative"}, Path("HOME/.cache/comfy-llm")),
        ("darwin", {}, Path("HOME/Library/Caches/comfy-llm")),
        ("win32", {"LOCALAPPDATA": "/local"}, Path("/local/comfy-llm")),
    ],
)
def test_storage_root_falls_back_to_the_user_cache(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    platform: str,
    env: dict[str, str],
    expected: Path,
) -> None:
    for name in ("COMFY_MODAL_LOCAL_LLM_STORAGE_ROOT", "XDG_CACHE_HOME", "LOCALAPPDATA"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(_settings.sys, "platform", platform)
    monkeypatch.setattr(Path, "home", classmethod(lambda cls: tmp_path))
    resolved = Path(str(expected).replace("HOME", str(tmp_path)))
    assert default_storage_root() == resolved


def test_staging_never_imports_comfyui() -> None:
    import subprocess
    import sys

    code = (
        "import sys, comfy_llm_staging; "
        "bad = [m for m in ('comfy', 'folder_paths', 'comfy_api', 'server', 'torch') "
        "if m in sys.modules]; print(bad)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"


def _allowed(name: str) -> bool:
    def matches(patterns: tuple[str, ...]) -> bool:
        return any(fnmatch.fnmatch(name, pattern) for pattern in patterns)

    return matches(ALLOW_PATTERNS) and not matches(IGNORE_PATTERNS)


@pytest.mark.parametrize(
    "name",
    [
        "model.safetensors",
        "model-00001-of-00002.safetensors",
        "model.safetensors.index.json",
        "config.json",
        "generation_config.json",
        "hf_quant_config.json",
        "quantization_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "added_tokens.json",
        "tokenizer.model",
        "vocab.json",
        "merges.txt",
        "vocab.txt",
        "chat_template.json",
        "chat_template.jinja",
        "processor_config.json",
        "preprocessor_config.json",
        "video_preprocessor_config.json",
    ],
)
def test_allow_list_covers_what_loaders_need(name: str) -> None:
    assert _allowed(name)


@pytest.mark.parametrize(
    "name",
    [
        "modeling_custom.py",
        "pytorch_model.bin",
        "model.pt",
        "model.pth",
        "weights.pkl",
        "model.ckpt",
        "flax_model.msgpack",
        "tf_model.h5",
        "README.md",
        ".gitattributes",
        "model.gguf",
        "onnx/model.onnx",
        "sub/evil.py",
    ],
)
def test_allow_list_never_admits_code_or_pickles(name: str) -> None:
    assert not _allowed(name)


@pytest.mark.parametrize("value", ["0", "-5", "soon", "nan", "inf"])
def test_bad_lease_timeout_setting_is_refused(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("COMFY_MODAL_LLM_STAGE_LEASE_TIMEOUT_SECONDS", value)
    with pytest.raises(InvalidSettingError, match="COMFY_MODAL_LLM_STAGE_LEASE_TIMEOUT_SECONDS"):
        _settings.lease_timeout_seconds()


def test_lease_timeout_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COMFY_MODAL_LLM_STAGE_LEASE_TIMEOUT_SECONDS", raising=False)
    assert _settings.lease_timeout_seconds() == 3600
    monkeypatch.setenv("COMFY_MODAL_LLM_STAGE_LEASE_TIMEOUT_SECONDS", "12.5")
    assert _settings.lease_timeout_seconds() == 12.5
    assert _settings.lease_timeout_seconds(3) == 3


def test_endpoint_is_read_at_call_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:1/")
    assert _settings.hub_endpoint() == "http://127.0.0.1:1"
    assert _settings.hub_endpoint("http://127.0.0.1:2") == "http://127.0.0.1:2"
    monkeypatch.delenv("HF_ENDPOINT")
    assert _settings.hub_endpoint() == "https://huggingface.co"


@pytest.mark.parametrize(
    ("error", "builtin"),
    [
        (InvalidRevisionError("not pinned", repository="o/m", revision="main"), ValueError),
        (InsufficientDiskSpaceError("/data", 10 * 1024**3, 1024**3), OSError),
        (
            StagingLeaseTimeoutError(
                "waited",
                lease_path="/x.lease.json",
                waited_seconds=5.0,
                limit_seconds=5.0,
                holder={"pid": 1, "host": "h"},
            ),
            TimeoutError,
        ),
        (SnapshotVerificationError("model.safetensors", "sha256", "aa", "bb"), StagingError),
    ],
)
def test_errors_carry_builtins_attributes_and_survive_pickling(
    error: StagingError, builtin: type[BaseException]
) -> None:
    assert isinstance(error, StagingError)
    assert isinstance(error, builtin)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert str(copy) == str(error)
    assert copy.__dict__ == error.__dict__


def test_disk_error_message_names_numbers_and_fix() -> None:
    error = InsufficientDiskSpaceError("/data", 10 * 1024**3, 1024**3)
    text = str(error)
    assert "10.00 GiB" in text
    assert "1.00 GiB" in text
    assert "COMFY_MODAL_LOCAL_LLM_STORAGE_ROOT" in text
    assert error.needed_bytes == 10 * 1024**3
    assert error.available_bytes == 1024**3


def test_public_api_is_explicit() -> None:
    for name in staging.__all__:
        assert hasattr(staging, name), name
    for name in (
        "StagedSnapshot",
        "stage_snapshot",
        "snapshot_path",
        "find_completed_snapshot",
        "require_completed_snapshot",
        "default_storage_root",
        "ALLOW_PATTERNS",
        "StagingError",
    ):
        assert name in staging.__all__
