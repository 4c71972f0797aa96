from __future__ import annotations

import pytest
from comfy_llm_core import InvalidSettingError
from comfy_llm_profiles import read_settings

GIB = 1024**3


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "COMFY_MODAL_LLM_MAX_DOWNLOAD_GB",
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "HF_ENDPOINT",
    ):
        monkeypatch.delenv(name, raising=False)


def test_defaults() -> None:
    settings = read_settings()
    assert settings.max_download_bytes == 96 * GIB
    assert settings.token is None
    assert settings.endpoint == "https://huggingface.co"


def test_environment_is_read_at_call_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMFY_MODAL_LLM_MAX_DOWNLOAD_GB", "0.5")
    monkeypatch.setenv("HUGGING_FACE_HUB_TOKEN", "legacy")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:1234/")
    settings = read_settings()
    assert settings.max_download_bytes == GIB // 2
    assert settings.token == "legacy"
    assert settings.endpoint == "http://127.0.0.1:1234"
    monkeypatch.setenv("HF_TOKEN", "primary")
    assert read_settings().token == "primary"


def test_arguments_win(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "env")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:1")
    settings = read_settings(token="arg", endpoint="http://127.0.0.1:2/")
    assert (settings.token, settings.endpoint) == ("arg", "http://127.0.0.1:2")
    assert read_settings(token="  ").token == "env"


@pytest.mark.parametrize("value", ["lots", "0", "-1", "nan", "inf"])
def test_bad_download_limit(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("COMFY_MODAL_LLM_MAX_DOWNLOAD_GB", value)
    with pytest.raises(InvalidSettingError) as caught:
        read_settings()
    assert caught.value.name == "COMFY_MODAL_LLM_MAX_DOWNLOAD_GB"
    assert repr(value) in str(caught.value) and "a number above 0" in str(caught.value)


def test_bad_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "huggingface.co")
    with pytest.raises(InvalidSettingError, match="http"):
        read_settings()
