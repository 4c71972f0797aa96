"""GenerationSettings validation and the environment variables."""

from __future__ import annotations

import pytest
from comfy_llm_core import InvalidSettingError
from comfy_llm_residency import (
    GenerationSettingsError,
    ResidentModelManager,
    default_reserve_gb,
    max_resident_models,
    memory_recovery_timeout_seconds,
)
from comfy_llm_residency.backend import GenerationSettings

ENV_NAMES = (
    "COMFY_MODAL_LOCAL_LLM_MAX_RESIDENT_MODELS",
    "COMFY_MODAL_LLM_MAX_RESIDENT_MODELS",
    "COMFY_MODAL_LOCAL_LLM_RESERVE_FREE_GB",
    "COMFY_MODAL_LLM_RESERVE_FREE_GB",
    "COMFY_MODAL_LLM_MEMORY_RECOVERY_TIMEOUT_SECONDS",
)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)


def test_generation_settings_defaults():
    settings = GenerationSettings()
    assert settings.max_new_tokens == 512
    assert settings.temperature == 0.2  # the seed node's default
    assert settings.top_p == 0.95
    assert settings.seed is None
    assert settings.enable_reasoning is True


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_new_tokens", 0),
        ("max_new_tokens", -5),
        ("max_new_tokens", 1.5),
        ("max_new_tokens", True),
        ("temperature", -0.1),
        ("temperature", float("nan")),
        ("temperature", float("inf")),
        ("temperature", "hot"),
        ("top_p", 0),
        ("top_p", 1.01),
        ("top_p", -1),
        ("seed", -1),
        ("seed", 1.0),
        ("enable_reasoning", "yes"),
        ("min_new_tokens", -1),
        ("min_new_tokens", 513),  # above max_new_tokens (512)
        ("min_new_tokens", 2.0),
    ],
)
def test_generation_settings_rejects(field, value):
    with pytest.raises(GenerationSettingsError) as caught:
        GenerationSettings(**{field: value})
    assert caught.value.field == field
    assert field in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_generation_settings_edges_accepted():
    GenerationSettings(max_new_tokens=1, temperature=0, top_p=1, seed=0)
    GenerationSettings(temperature=2, top_p=0.01, seed=2**63)
    GenerationSettings(max_new_tokens=64, min_new_tokens=64)  # a benchmark's fixed length


def test_generation_settings_round_trip():
    settings = GenerationSettings(
        max_new_tokens=64, temperature=0.2, seed=7, enable_reasoning=False, min_new_tokens=64
    )
    assert GenerationSettings.from_dict({**settings.to_dict(), "unknown": 1}) == settings


@pytest.mark.parametrize(
    ("target", "expected"),
    [("local_apple", 1), ("local_cpu", 1), ("local_cuda", 2), ("modal", 2)],
)
def test_max_resident_defaults(target, expected):
    assert max_resident_models(target) == expected


def test_max_resident_variables_are_per_target(monkeypatch):
    monkeypatch.setenv("COMFY_MODAL_LOCAL_LLM_MAX_RESIDENT_MODELS", "3")
    monkeypatch.setenv("COMFY_MODAL_LLM_MAX_RESIDENT_MODELS", " 5 ")
    assert max_resident_models("local_apple") == 3
    assert max_resident_models("local_cpu") == 3
    assert max_resident_models("local_cuda") == 5
    assert max_resident_models("modal") == 5


def test_empty_variable_counts_as_unset(monkeypatch):
    monkeypatch.setenv("COMFY_MODAL_LOCAL_LLM_MAX_RESIDENT_MODELS", "  ")
    assert max_resident_models("local_cpu") == 1


@pytest.mark.parametrize("value", ["abc", "0", "-1", "1.5"])
def test_invalid_max_resident_names_the_variable(monkeypatch, value):
    monkeypatch.setenv("COMFY_MODAL_LLM_MAX_RESIDENT_MODELS", value)
    with pytest.raises(InvalidSettingError) as caught:
        max_resident_models("modal")
    assert caught.value.name == "COMFY_MODAL_LLM_MAX_RESIDENT_MODELS"
    assert "COMFY_MODAL_LLM_MAX_RESIDENT_MODELS" in str(caught.value)


def test_reserve_defaults(monkeypatch):
    assert default_reserve_gb("local_apple") == 4.0
    assert default_reserve_gb("local_cpu") == 4.0
    assert default_reserve_gb("local_cuda") == 4.0
    assert default_reserve_gb("modal") == 24.0
    monkeypatch.setenv("COMFY_MODAL_LOCAL_LLM_RESERVE_FREE_GB", "0")
    assert default_reserve_gb("local_apple") == 0.0
    assert default_reserve_gb("local_cuda") == 0.0
    assert default_reserve_gb("modal") == 24.0


def test_modal_reserve_reads_the_seed_variable(monkeypatch):
    monkeypatch.setenv("COMFY_MODAL_LLM_RESERVE_FREE_GB", "12.5")
    assert default_reserve_gb("modal") == 12.5
    assert default_reserve_gb("local_cuda") == 4.0
    monkeypatch.setenv("COMFY_MODAL_LLM_RESERVE_FREE_GB", "-1")
    with pytest.raises(InvalidSettingError, match="COMFY_MODAL_LLM_RESERVE_FREE_GB"):
        default_reserve_gb("modal")


@pytest.mark.parametrize("value", ["lots", "-1", "nan", "inf"])
def test_invalid_reserve_names_the_variable(monkeypatch, value):
    monkeypatch.setenv("COMFY_MODAL_LOCAL_LLM_RESERVE_FREE_GB", value)
    with pytest.raises(InvalidSettingError, match="COMFY_MODAL_LOCAL_LLM_RESERVE_FREE_GB"):
        default_reserve_gb("local_cpu")


def test_recovery_timeout(monkeypatch):
    assert memory_recovery_timeout_seconds() == 15.0
    monkeypatch.setenv("COMFY_MODAL_LLM_MEMORY_RECOVERY_TIMEOUT_SECONDS", "2.5")
    assert memory_recovery_timeout_seconds() == 2.5
    monkeypatch.setenv("COMFY_MODAL_LLM_MEMORY_RECOVERY_TIMEOUT_SECONDS", "-3")
    with pytest.raises(
        InvalidSettingError, match="COMFY_MODAL_LLM_MEMORY_RECOVERY_TIMEOUT_SECONDS"
    ):
        memory_recovery_timeout_seconds()


def test_manager_reads_environment(monkeypatch, fake):
    monkeypatch.setenv("COMFY_MODAL_LOCAL_LLM_MAX_RESIDENT_MODELS", "3")
    monkeypatch.setenv("COMFY_MODAL_LLM_MEMORY_RECOVERY_TIMEOUT_SECONDS", "4")
    manager = ResidentModelManager(
        "local_cpu", backend_factory=lambda *a: None, memory_probe=fake.FakeProbe()
    )
    assert manager.max_resident == 3
    assert manager.recovery_timeout_seconds == 4.0


def test_manager_rejects_invalid_environment(monkeypatch, fake):
    monkeypatch.setenv("COMFY_MODAL_LLM_MAX_RESIDENT_MODELS", "two")
    with pytest.raises(InvalidSettingError, match="COMFY_MODAL_LLM_MAX_RESIDENT_MODELS"):
        ResidentModelManager(
            "modal", backend_factory=lambda *a: None, memory_probe=fake.FakeProbe()
        )


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"max_resident": 0}, "max_resident"),
        ({"recovery_timeout_seconds": -1}, "recovery_timeout_seconds"),
        ({"poll_interval_seconds": 0}, "poll_interval_seconds"),
    ],
)
def test_manager_rejects_invalid_arguments(fake, kwargs, name):
    with pytest.raises(InvalidSettingError) as caught:
        ResidentModelManager(
            "local_cpu", backend_factory=lambda *a: None, memory_probe=fake.FakeProbe(), **kwargs
        )
    assert caught.value.name == name


def test_unknown_target_is_refused(fake):
    with pytest.raises(InvalidSettingError, match="local_cpu"):
        ResidentModelManager("mars", backend_factory=lambda *a: None, memory_probe=fake.FakeProbe())
