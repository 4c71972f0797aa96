"""Inspection against a hostile, broken or stalled Hub: our errors, bounded work, no hang."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_core import ErrorAction, ExecutionTarget, InvalidSettingError
from comfy_llm_profiles import resolve_profile
from comfy_llm_profiles.errors import (
    HubAccessError,
    HubDataError,
    HubTimeoutError,
    HubUnavailableError,
    InvalidConfigError,
)

REPO = "owner/tiny-qwen"
CPU = ExecutionTarget.LOCAL_CPU
FilesFactory = Callable[..., dict[str, bytes]]
ConfigFactory = Callable[..., dict[str, Any]]

HOSTILE_NAMES = [
    "../../../../victim/evil.safetensors",
    "../../../../victim/model.safetensors.index.json",
    "/srv/ComfyUI/models/checkpoints/model.safetensors",  # absolute: refused
    "..\\..\\victim\\evil.safetensors",
    "evil\x00.safetensors",
    "C:/victim/evil.safetensors",
    "weights/../../evil.safetensors",
    "a" * 300 + ".safetensors",
]


def _resolve(hub: Any, root: Path, **kwargs: Any) -> Any:
    kwargs.setdefault("endpoint", hub.endpoint)
    return resolve_profile(REPO, CPU, storage_root=root, **kwargs)


@pytest.fixture
def repo(hf_env: Any, make_config: ConfigFactory, make_files: FilesFactory) -> Any:
    hf_env.add_repo(REPO, make_files(make_config()))
    return hf_env


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_unsafe_sibling_name_refuses_the_repository(repo: Any, tmp_path: Path, name: str) -> None:
    repo.tamper(REPO, extra_siblings=[{"rfilename": name, "size": 10}])
    with pytest.raises(HubDataError) as caught:
        _resolve(repo, tmp_path)
    error = caught.value
    assert (error.kind, error.path) == ("unsafe_path", name)
    assert ascii(name)[:40] in str(error)
    assert "\x00" not in str(error)
    assert error.action is ErrorAction.FIX_INPUT
    assert repo.file_requests("GET") == []  # refused before config.json
    assert not (tmp_path / "profiles").exists()


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"size": "abc"}, "siblings[0].size"),
        ({"size": True}, "siblings[0].size"),
        ({"size": 2**60}, "siblings[0].size"),
        ({"blobId": "not hex"}, "siblings[0].blobId"),
    ],
)
def test_bad_sibling_fields_are_named(
    repo: Any, tmp_path: Path, fields: dict[str, Any], named: str
) -> None:
    repo.tamper(REPO, sibling_fields={"config.json": fields})
    with pytest.raises(HubDataError) as caught:
        _resolve(repo, tmp_path)
    assert named in str(caught.value)
    assert caught.value.field == named
    assert REPO in str(caught.value)
    assert "invalid literal" not in str(caught.value)


def test_deep_model_info_is_refused_before_parsing(repo: Any, tmp_path: Path) -> None:
    repo.tamper(REPO, info_body=b"[" * 400_000 + b"]" * 400_000)
    with pytest.raises(HubDataError, match="nested more than") as caught:
        _resolve(repo, tmp_path)
    assert "recursion" not in str(caught.value)


def test_deep_config_json_is_refused(repo: Any, tmp_path: Path) -> None:
    repo.tamper(
        REPO, file_bodies={"config.json": b'{"a": ' + b"[" * 400_000 + b"]" * 400_000 + b"}"}
    )
    with pytest.raises(InvalidConfigError, match="nested more than") as caught:
        _resolve(repo, tmp_path)
    assert "recursion" not in str(caught.value)


def test_config_larger_than_advertised_is_cut_off_with_bounded_memory(
    repo: Any, tmp_path: Path
) -> None:
    # siblings keep claiming the true (small) size; the server sends 64 MiB of integers
    body = b'{"model_type": "qwen3_5", "x": [' + b"1," * (32 * 1024**2) + b"1]}"
    repo.tamper(REPO, file_bodies={"config.json": body})
    # peak RSS of the child itself: VmHWM starts afresh at exec (ru_maxrss would inherit ours)
    script = textwrap.dedent(
        f"""
        import json
        from comfy_llm_core import ExecutionTarget
        from comfy_llm_profiles import resolve_profile
        from comfy_llm_profiles.errors import InvalidConfigError

        def peak_kib():
            with open("/proc/self/status") as status:
                return int(status.read().split("VmHWM:")[1].split()[0])

        before = peak_kib()
        try:
            resolve_profile({REPO!r}, ExecutionTarget.LOCAL_CPU,
                            storage_root={str(tmp_path)!r}, endpoint={repo.endpoint!r})
        except InvalidConfigError as error:
            outcome = str(error)
        else:
            outcome = "accepted"
        print(json.dumps({{"outcome": outcome, "grew_kib": peak_kib() - before}}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert "byte limit" in report["outcome"]
    assert report["grew_kib"] < 48 * 1024, report  # 64 MiB body, 4 MiB cap: never held whole


def test_stalled_hub_times_out_naming_endpoint_and_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, silent_endpoint: str
) -> None:
    monkeypatch.setenv("COMFY_MODAL_LLM_HUB_TIMEOUT_SECONDS", "0.5")
    started = time.monotonic()
    with pytest.raises(HubTimeoutError) as caught:
        resolve_profile(REPO, CPU, storage_root=tmp_path, endpoint=silent_endpoint)
    assert time.monotonic() - started < 10
    text = str(caught.value)
    assert silent_endpoint in text
    assert "COMFY_MODAL_LLM_HUB_TIMEOUT_SECONDS" in text
    assert isinstance(caught.value, HubUnavailableError)
    assert caught.value.action is ErrorAction.RETRY


def test_stalled_config_request_times_out_too(repo: Any, tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("COMFY_MODAL_LLM_HUB_TIMEOUT_SECONDS", "0.5")
    repo.inject_fault("GET", "config.json", delay=30)
    started = time.monotonic()
    with pytest.raises(HubTimeoutError, match=r"config\.json"):
        _resolve(repo, tmp_path)
    assert time.monotonic() - started < 10


def test_bad_timeout_setting_is_named(repo: Any, tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("COMFY_MODAL_LLM_HUB_TIMEOUT_SECONDS", "forever")
    with pytest.raises(InvalidSettingError, match="COMFY_MODAL_LLM_HUB_TIMEOUT_SECONDS"):
        _resolve(repo, tmp_path)


@pytest.mark.parametrize("token", [None, "hf_expired_token"])
def test_unauthorized_info_request_names_hf_token(
    repo: Any, tmp_path: Path, token: str | None
) -> None:
    repo.inject_fault("GET", "/api/models", status=401)
    with pytest.raises(HubAccessError) as caught:
        _resolve(repo, tmp_path, token=token)
    assert (caught.value.kind, caught.value.status) == ("unauthorized", 401)
    text = str(caught.value)
    assert "HF_TOKEN" in text
    assert "network" not in text
    assert caught.value.token_provided is (token is not None)
    assert token is None or token not in text


def test_cut_connection_is_one_line(repo: Any, tmp_path: Path) -> None:
    repo.inject_fault("GET", "/api/models", cut_after_bytes=3)
    with pytest.raises(HubUnavailableError) as caught:
        _resolve(repo, tmp_path)
    assert "\n" not in str(caught.value)


@pytest.fixture
def silent_endpoint() -> Iterator[str]:
    """A loopback port whose connections are accepted (by the kernel) and never answered."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        server.close()


def test_siblings_list_json_roundtrip_still_resolves(repo: Any, tmp_path: Path) -> None:
    # the checks accept what the real Hub sends (null blobId, lfs objects, security status)
    resolved = _resolve(repo, tmp_path)
    assert resolved.profile.repository == REPO
    assert json.loads(resolved.manifest_path.read_text())["repository"] == REPO


@pytest.mark.parametrize(
    ("listed", "folder", "inside"),
    [
        (["weights", "weights/part-1.safetensors"], "weights", "weights/part-1.safetensors"),
        (["config.json/extra.json"], "config.json", "config.json/extra.json"),  # the real one
    ],
)
def test_a_path_listed_as_file_and_folder_names_the_repository_and_both_paths(
    repo: Any, tmp_path: Path, listed: list[str], folder: str, inside: str
) -> None:
    # no snapshot could hold both (writing one fails with [Errno 21] Is a directory)
    repo.tamper(REPO, extra_siblings=[{"rfilename": name, "size": 10} for name in listed])
    with pytest.raises(HubDataError) as caught:
        _resolve(repo, tmp_path)
    assert caught.value.path == folder  # kind "unsafe_path"
    message = str(caught.value)
    assert REPO in message and repr(folder) in message and repr(inside) in message, message
    assert "Errno" not in message
    assert caught.value.action is ErrorAction.FIX_INPUT
    assert repo.file_requests("GET") == []  # refused before config.json
