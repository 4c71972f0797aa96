"""GGUF files on disk: checked where they enter, decided from their header, pinned by content."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from comfy_llm_core import ExecutionTarget
from comfy_llm_profiles import LocalFolderError, UnsafeGgufError, gguf_file_names, resolve_profile
from comfy_llm_profiles._registry import REGISTRY_VERSIONS
from comfy_llm_profiles.errors import EngineUnavailableError, UnsupportedArchitectureError
from comfy_llm_testworld.gguf_checkpoints import GGUF_MMPROJ_NAME, write_gguf_pair
from comfy_llm_testworld.gguf_hostile import hostile_model_variants, hostile_projector_variants

CPU = ExecutionTarget.LOCAL_CPU
WITH_LLAMACPP = frozenset({"transformers", "llama_cpp"})


@pytest.fixture
def llm_folder(tmp_path: Path) -> Path:
    """models/LLM with one folder holding the tiny SmolVLM as Q8_0 + its projector."""
    folder = tmp_path / "models" / "LLM"
    write_gguf_pair(folder / "tiny-smolvlm-GGUF", quantization="Q8_0")
    return folder


def _resolve(reference: str, root: Path, llm: Path, **kwargs: object):  # type: ignore[no-untyped-def]
    options = {"backends": WITH_LLAMACPP, "model_folders": {"LLM": [llm]}} | kwargs
    return resolve_profile(reference, CPU, storage_root=root, **options)  # type: ignore[arg-type]


def test_a_gguf_folder_resolves_to_a_llama_cpp_profile(llm_folder: Path, tmp_path: Path) -> None:
    profile = _resolve("models/LLM/tiny-smolvlm-GGUF", tmp_path / "store", llm_folder).profile
    assert profile.backend == "llama_cpp"
    assert profile.is_local and profile.repository == "local/tiny-smolvlm-Q8_0"
    # The family the projector says (idefics3 -> SmolVLM), its HF architecture for the parser.
    assert (profile.architecture, profile.model_type) == (
        "Idefics3ForConditionalGeneration",
        "idefics3",
    )
    assert profile.quantization_method == "Q8_0"
    assert profile.dtype == "gguf"
    assert profile.modalities == ("text", "image", "file")  # no video through llama.cpp
    assert (
        profile.limits.media.video.max_video_frames == 0
        and profile.limits.media.image.max_images > 0
    )
    assert profile.registry_version == REGISTRY_VERSIONS[CPU]
    options = dict(profile.backend_options)
    assert gguf_file_names(options) == ("tiny-smolvlm-Q8_0.gguf", GGUF_MMPROJ_NAME)
    assert options["gguf_architecture"] == "llama" and options["projector_type"] == "idefics3"
    terms = {k: v for k, v in options.items() if str(k).startswith("memory_")}
    assert set(terms) == {"memory_weights_bytes", "memory_kv_bytes", "memory_compute_bytes"}
    assert profile.estimated_memory_bytes == sum(int(v) for v in terms.values())
    # Weights as stored: the two files' tensor bytes, a little under the files' sizes.
    files = sum(p.stat().st_size for p in (llm_folder / "tiny-smolvlm-GGUF").iterdir())
    assert 0.5 * files < int(options["memory_weights_bytes"]) <= files
    assert profile.runtime_requirements == ("llama-cpp-python==0.3.36",)


def test_naming_the_file_gives_the_same_profile(llm_folder: Path, tmp_path: Path) -> None:
    root = tmp_path / "store"
    by_folder = _resolve("models/LLM/tiny-smolvlm-GGUF", root, llm_folder).profile
    by_file = _resolve("models/LLM/tiny-smolvlm-GGUF/tiny-smolvlm-Q8_0.gguf", root, llm_folder)
    absolute = _resolve(
        str(llm_folder / "tiny-smolvlm-GGUF" / "tiny-smolvlm-Q8_0.gguf"), root, llm_folder
    )
    assert by_file.profile.profile_id == by_folder.profile_id == absolute.profile.profile_id


def test_several_quantizations_in_one_folder_are_told_apart(
    llm_folder: Path, tmp_path: Path
) -> None:
    folder = llm_folder / "tiny-smolvlm-GGUF"
    write_gguf_pair(folder, quantization="F32")  # LM Studio keeps quants side by side
    root = tmp_path / "store"
    expected = r"expected one model \.gguf, found tiny-smolvlm-F32"
    with pytest.raises(LocalFolderError, match=expected):
        _resolve("models/LLM/tiny-smolvlm-GGUF", root, llm_folder)
    q8 = _resolve("models/LLM/tiny-smolvlm-GGUF/tiny-smolvlm-Q8_0.gguf", root, llm_folder).profile
    f32 = _resolve("models/LLM/tiny-smolvlm-GGUF/tiny-smolvlm-F32.gguf", root, llm_folder).profile
    assert (q8.quantization_method, f32.quantization_method) == ("Q8_0", "F32")
    assert q8.profile_id != f32.profile_id
    assert q8.revision != f32.revision  # each pins its own two files


def test_the_projector_is_not_a_model(llm_folder: Path, tmp_path: Path) -> None:
    with pytest.raises(LocalFolderError, match="vision projector"):
        _resolve(f"models/LLM/tiny-smolvlm-GGUF/{GGUF_MMPROJ_NAME}", tmp_path / "s", llm_folder)


@pytest.mark.parametrize("which", ["model", "projector"])
def test_hostile_files_are_refused_where_they_enter(
    llm_folder: Path, tmp_path: Path, which: str
) -> None:
    folder = llm_folder / "tiny-smolvlm-GGUF"
    name = "tiny-smolvlm-Q8_0.gguf" if which == "model" else GGUF_MMPROJ_NAME
    original = (folder / name).read_bytes()
    variants = (hostile_model_variants if which == "model" else hostile_projector_variants)(
        original
    )
    assert len(variants) >= 8
    for variant in variants:
        (folder / name).write_bytes(variant.content)
        with pytest.raises(UnsafeGgufError) as caught:
            _resolve("models/LLM/tiny-smolvlm-GGUF", tmp_path / "store", llm_folder)
        assert caught.value.path.endswith(name), variant.name
        assert variant.reason in caught.value.reason, variant.name
        assert "\n" not in str(caught.value)  # one line each
    assert not (tmp_path / "store" / "profiles").exists() or not any(
        (tmp_path / "store" / "profiles").glob("*.json")
    )


def test_a_text_only_llama_file_is_no_reviewed_family(llm_folder: Path, tmp_path: Path) -> None:
    (llm_folder / "tiny-smolvlm-GGUF" / GGUF_MMPROJ_NAME).unlink()
    with pytest.raises(UnsupportedArchitectureError, match=r"GGUF llama \(text only\)") as caught:
        _resolve("models/LLM/tiny-smolvlm-GGUF", tmp_path / "store", llm_folder)
    assert "llama + idefics3" in caught.value.supported


def test_without_llama_cpp_installed_the_install_is_named(llm_folder: Path, tmp_path: Path) -> None:
    with pytest.raises(EngineUnavailableError, match=r"llama\.cpp") as caught:
        _resolve(
            "models/LLM/tiny-smolvlm-GGUF",
            tmp_path / "store",
            llm_folder,
            backends={"transformers"},
        )
    assert (
        "llama-cpp-python" in caught.value.install_hint or "llamacpp" in caught.value.install_hint
    )


def test_a_changed_file_changes_the_pin(llm_folder: Path, tmp_path: Path) -> None:
    root = tmp_path / "store"
    before = _resolve("models/LLM/tiny-smolvlm-GGUF", root, llm_folder).profile
    folder = llm_folder / "tiny-smolvlm-GGUF"
    shutil.copy(folder / "tiny-smolvlm-Q8_0.gguf", tmp_path / "copy.gguf")
    write_gguf_pair(folder, quantization="Q8_0", context_tokens=2048)
    after = _resolve("models/LLM/tiny-smolvlm-GGUF", root, llm_folder).profile
    assert after.revision != before.revision
    assert after.limits.context_tokens == 2048 < before.limits.context_tokens


def _counting_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every GGUF header the checks read (the real reader, counted)."""
    import comfy_llm_profiles._gguf_rules as rules

    reads: list[str] = []
    real = rules.read_gguf

    def counting(path: Path, *args: object, **kwargs: object) -> object:
        reads.append(Path(path).name)
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(rules, "read_gguf", counting)
    return reads


def test_an_unchanged_pair_is_not_read_again_a_rewritten_one_is(
    llm_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A local reference resolves on every request: its headers are read once while unchanged."""
    import time

    import comfy_llm_profiles._local_gguf as local_gguf

    reads = _counting_reads(monkeypatch)
    # the files were written just now: check them as if a while later (past the racy window)
    monkeypatch.setattr(local_gguf, "_clock", lambda: time.time_ns() + 10 * 10**9, raising=False)
    reference, root = "models/LLM/tiny-smolvlm-GGUF", tmp_path / "store"
    model = "tiny-smolvlm-Q8_0.gguf"

    first = _resolve(reference, root, llm_folder).profile
    assert sorted(reads) == sorted([model, GGUF_MMPROJ_NAME])
    reads.clear()
    assert _resolve(reference, root, llm_folder).profile == first
    assert reads == []  # the same files: no header read again

    folder = llm_folder / "tiny-smolvlm-GGUF"
    variants = hostile_model_variants((folder / model).read_bytes())
    truncated = next(v for v in variants if v.name == "truncated-data")
    (folder / model).write_bytes(truncated.content)
    with pytest.raises(UnsafeGgufError, match="past the end of the file"):
        _resolve(reference, root, llm_folder)
    assert reads == [model]  # rewritten: read and refused


def test_a_pair_written_just_before_its_check_is_read_again(
    llm_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """File times are coarse: a second write in the same tick could keep the identity."""
    reads = _counting_reads(monkeypatch)
    for _ in range(2):
        _resolve("models/LLM/tiny-smolvlm-GGUF", tmp_path / "store", llm_folder)
    assert len(reads) == 4  # both files, both times
