"""A GGUF repository's quantizations, and the two files one choice downloads."""

from __future__ import annotations

import pytest
from comfy_llm_profiles._hub_gguf import (
    DEFAULT_GGUF_QUANTIZATION,
    choose_hub_gguf,
    hub_gguf_quantizations,
)
from comfy_llm_profiles._inspect import RepositoryFile
from comfy_llm_profiles.errors import GgufRepositoryError, UnsupportedQuantizationError

SHA = "0123456789abcdef0123456789abcdef01234567"


def _file(path: str, size: int = 100, lfs: bool = True) -> RepositoryFile:
    return RepositoryFile(path, size, ("ab" * 32) if lfs else None)


# What ggml-org/Qwen3-VL-2B-Instruct-GGUF-style repositories hold (names as published).
REPO = (
    _file(".gitattributes", lfs=False),
    _file("README.md", lfs=False),
    _file("Qwen3-VL-2B-Instruct-Q4_K_M.gguf", 1_100),
    _file("Qwen3-VL-2B-Instruct-Q8_0.gguf", 1_800),
    _file("Qwen3-VL-2B-Instruct-F16.gguf", 3_400),
    _file("mmproj-Qwen3-VL-2B-Instruct-Q8_0.gguf", 400),
    _file("mmproj-Qwen3-VL-2B-Instruct-F16.gguf", 800),
    _file("big/Qwen3-VL-2B-Instruct-BF16-00001-of-00002.gguf", 5_000),
)


def test_the_quantizations_on_offer_leave_out_projectors_and_split_parts() -> None:
    assert sorted(hub_gguf_quantizations(REPO)) == ["F16", "Q4_K_M", "Q8_0"]


def test_the_default_is_q4_k_m_with_the_f16_projector() -> None:
    choice = choose_hub_gguf("o/m", SHA, "local_cpu", REPO)
    assert choice.quantization == DEFAULT_GGUF_QUANTIZATION == "Q4_K_M"
    assert [f.path for f in choice.files] == [
        "Qwen3-VL-2B-Instruct-Q4_K_M.gguf",
        "mmproj-Qwen3-VL-2B-Instruct-F16.gguf",
    ]
    assert choice.download_bytes == 1_900  # only these two are downloaded
    assert choice.offered == ("F16", "Q4_K_M", "Q8_0")


def test_a_choice_is_case_insensitive_and_refused_when_not_offered() -> None:
    assert choose_hub_gguf("o/m", SHA, "local_cpu", REPO, "q8_0").model.path.endswith("Q8_0.gguf")
    with pytest.raises(UnsupportedQuantizationError, match="F16, Q4_K_M, Q8_0") as caught:
        choose_hub_gguf("o/m", SHA, "local_cpu", REPO, "IQ2_XS")
    assert caught.value.allowed == ("F16", "Q4_K_M", "Q8_0")


def test_without_q4_k_m_the_only_file_is_taken_else_a_choice_is_asked_for() -> None:
    only = (_file("m-Q8_0.gguf"),)
    assert choose_hub_gguf("o/m", SHA, "local_cpu", only).quantization == "Q8_0"
    assert choose_hub_gguf("o/m", SHA, "local_cpu", only).projector is None
    two = (_file("m-Q8_0.gguf"), _file("m-F16.gguf"))
    with pytest.raises(UnsupportedQuantizationError, match="Q4_K_M"):
        choose_hub_gguf("o/m", SHA, "local_cpu", two)


def test_files_that_cannot_be_verified_or_no_model_are_refused() -> None:
    with pytest.raises(GgufRepositoryError, match="no LFS sha256"):
        choose_hub_gguf("o/m", SHA, "local_cpu", (_file("m-Q4_K_M.gguf", lfs=False),))
    with pytest.raises(GgufRepositoryError, match="no single-file model"):
        choose_hub_gguf("o/m", SHA, "local_cpu", (_file("mmproj-m-F16.gguf"),))
