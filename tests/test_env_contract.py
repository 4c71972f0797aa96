"""Environment variables are read one way: ``comfy_llm_core.env_*``, one error class."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import pytest
from comfy_llm_core import InvalidSettingError

REPO_ROOT = Path(__file__).resolve().parents[1]
PACKAGES = sorted(p.name for p in (REPO_ROOT / "packages").iterdir() if (p / "src").is_dir())


def _environment_reads(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in {"environ", "getenv", "environb"}
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
        ):
            found.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno} os.{node.attr}")
        if isinstance(node, ast.ImportFrom) and node.module == "os":
            for alias in node.names:
                if alias.name in {"environ", "getenv", "environb"}:
                    found.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno} from os")
    return found


@pytest.mark.parametrize("package", [p for p in PACKAGES if p != "core"])
def test_packages_read_the_environment_only_through_core(package: str) -> None:
    sources = sorted((REPO_ROOT / "packages" / package / "src").rglob("*.py"))
    offenders = [hit for path in sources for hit in _environment_reads(path)]
    assert offenders == []


def _profiles_download_limit() -> object:
    from comfy_llm_profiles import read_settings

    return read_settings()


def _profiles_endpoint() -> object:
    from comfy_llm_profiles import read_settings

    return read_settings()


def _staging_lease() -> object:
    from comfy_llm_staging import _settings

    return _settings.lease_timeout_seconds()


def _modal_stage_lease() -> object:
    from comfy_llm_modal_remote import ModalSettings

    return ModalSettings.from_env()


def _residency_max_resident() -> object:
    from comfy_llm_residency import max_resident_models

    return max_resident_models("modal")


def _residency_local_reserve() -> object:
    from comfy_llm_residency import default_reserve_gb

    return default_reserve_gb("local_cpu")


def _residency_recovery() -> object:
    from comfy_llm_residency import memory_recovery_timeout_seconds

    return memory_recovery_timeout_seconds()


@pytest.mark.parametrize(
    ("name", "value", "read"),
    [
        ("COMFY_MODAL_LLM_MAX_DOWNLOAD_GB", "lots", _profiles_download_limit),
        ("HF_ENDPOINT", "huggingface.co", _profiles_endpoint),
        ("COMFY_MODAL_LLM_STAGE_LEASE_TIMEOUT_SECONDS", "0", _staging_lease),
        ("COMFY_MODAL_LLM_STAGE_LEASE_SECONDS", "0.5", _modal_stage_lease),
        ("COMFY_MODAL_LLM_STAGE_LEASE_RENEW_SECONDS", "90", _modal_stage_lease),
        ("COMFY_MODAL_LLM_MAX_RESIDENT_MODELS", "two", _residency_max_resident),
        ("COMFY_MODAL_LOCAL_LLM_RESERVE_FREE_GB", "-1", _residency_local_reserve),
        ("COMFY_MODAL_LLM_MEMORY_RECOVERY_TIMEOUT_SECONDS", "nan", _residency_recovery),
    ],
)
def test_every_bad_variable_raises_the_one_error(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, read: Callable[[], object]
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(InvalidSettingError) as caught:
        read()
    assert type(caught.value) is InvalidSettingError
    assert (caught.value.name, caught.value.value) == (name, value)
    assert name in str(caught.value) and repr(value) in str(caught.value)
