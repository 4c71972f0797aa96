"""The GGUF checks: valid tiny files pass, every hostile variant is refused with its reason."""

from __future__ import annotations

import ctypes
import dataclasses
import subprocess
import sys
from pathlib import Path

import gguf
import pytest
from comfy_llm_backend_llamacpp import (
    GgufFilesError,
    UnsafeGgufError,
    check_files,
    find_gguf_files,
)
from comfy_llm_profiles import check_model_file, check_projector_file
from comfy_llm_profiles._gguf_format import GGML_TYPES, GgufLimits
from comfy_llm_testworld.gguf_checkpoints import GgufPair, build_gguf_files
from comfy_llm_testworld.gguf_hostile import hostile_model_variants, hostile_projector_variants

_MODEL, _MMPROJ = build_gguf_files().values()


def test_valid_pair_is_read_as_the_converter_wrote_it(gguf_pair: GgufPair) -> None:
    checked = check_files(gguf_pair.model, gguf_pair.mmproj)
    model, projector = checked.model, checked.projector
    assert (model.architecture, model.layers, model.embedding_width) == ("llama", 2, 64)
    assert model.quantization == "F32" and model.context_tokens == 4096
    assert model.chat_template and "<think>" in model.chat_template
    assert len(model.tokens) == len(model.token_types) == 410
    assert projector is not None and projector.projector_type == "idefics3"
    assert projector.output_width == 64
    # every tensor's place as gguf's own reader sees it
    reader = gguf.GGUFReader(gguf_pair.model)
    ours = {t.name: (t.offset, t.nbytes) for t in model.file.tensors}
    theirs = {
        t.name: (int(t.data_offset) - model.file.data_offset, int(t.n_bytes))
        for t in reader.tensors
    }
    assert ours == theirs


def test_quantized_model_is_accepted(scripted_pair: GgufPair) -> None:
    model = check_model_file(scripted_pair.model)
    assert model.quantization == "Q8_0"
    assert {t.ggml_type for t in model.file.tensors} == {"Q8_0", "F32"}


@pytest.mark.parametrize("variant", hostile_model_variants(_MODEL), ids=lambda v: v.name)
def test_hostile_model_is_refused_with_its_reason(variant, tmp_path: Path) -> None:
    path = tmp_path / f"{variant.name}.gguf"
    path.write_bytes(variant.content)
    with pytest.raises(UnsafeGgufError) as refused:
        check_model_file(path)
    assert variant.reason in refused.value.reason
    assert str(path) in str(refused.value) and "\n" not in str(refused.value)


@pytest.mark.parametrize("variant", hostile_projector_variants(_MMPROJ), ids=lambda v: v.name)
def test_hostile_projector_is_refused_with_its_reason(variant, tmp_path: Path) -> None:
    path = tmp_path / f"mmproj-{variant.name}.gguf"
    path.write_bytes(variant.content)
    with pytest.raises(UnsafeGgufError) as refused:
        check_projector_file(path)
    assert variant.reason in refused.value.reason


def test_roles_are_not_interchangeable(gguf_pair: GgufPair) -> None:
    with pytest.raises(UnsafeGgufError, match="vision projector"):
        check_model_file(gguf_pair.mmproj)
    with pytest.raises(UnsafeGgufError, match="not 'clip'"):
        check_projector_file(gguf_pair.model)


def test_projector_of_another_width_is_refused(gguf_pair: GgufPair) -> None:
    model = check_model_file(gguf_pair.model)
    wider = dataclasses.replace(model, embedding_width=128)
    with pytest.raises(UnsafeGgufError, match="another model's projector"):
        check_projector_file(gguf_pair.mmproj, wider)


def test_limits_bound_real_files_too(gguf_pair: GgufPair) -> None:
    with pytest.raises(UnsafeGgufError, match="items; the limit is 100"):
        check_model_file(gguf_pair.model, GgufLimits(max_array_items=100))
    with pytest.raises(UnsafeGgufError, match="runs past 4096 bytes"):
        check_model_file(gguf_pair.model, GgufLimits(max_metadata_bytes=4096))


def test_folder_pairing(tmp_path: Path, gguf_pair: GgufPair) -> None:
    (tmp_path / "model.gguf").write_bytes(gguf_pair.model.read_bytes())
    (tmp_path / "mmproj-model-f16.gguf").write_bytes(gguf_pair.mmproj.read_bytes())
    assert find_gguf_files(tmp_path) == (
        tmp_path / "model.gguf",
        tmp_path / "mmproj-model-f16.gguf",
    )
    (tmp_path / "other.gguf").write_bytes(b"")
    with pytest.raises(GgufFilesError, match=r"found model\.gguf, other\.gguf"):
        find_gguf_files(tmp_path)


def test_ggml_type_table_equals_gguf_packages() -> None:
    known = {t.value for t in gguf.GGMLQuantizationType}  # 0.19 predates Q1_0 / Q2_0
    for type_id, (name, block, size) in GGML_TYPES.items():
        if type_id not in known:
            continue
        quant = gguf.GGMLQuantizationType(type_id)
        assert quant.name == name
        if name == "Q8_1":  # gguf 0.19 keeps the old float32 d/s (40 bytes); ggml has 2 halves
            assert gguf.GGML_QUANT_SIZES[quant] == (32, 40) and size == 36
        elif quant in gguf.GGML_QUANT_SIZES:
            assert gguf.GGML_QUANT_SIZES[quant] == (block, size), name


def test_ggml_type_table_equals_the_built_engines() -> None:
    """Block and type sizes as the installed libggml computes them, for every id we accept."""
    import llama_cpp

    lib = Path(llama_cpp.__file__).parent / "lib"
    ggml = next(lib.glob("libggml-base.*"))
    library = ctypes.CDLL(str(ggml))
    library.ggml_blck_size.restype = ctypes.c_int64
    library.ggml_type_size.restype = ctypes.c_size_t
    for type_id, (name, block, size) in GGML_TYPES.items():
        assert (library.ggml_blck_size(type_id), library.ggml_type_size(type_id)) == (
            block,
            size,
        ), name


def test_engine_knows_every_allowed_name() -> None:
    """Each allowed architecture / projector type is a C string in the built libraries.

    The linker may store a short literal as the tail of a longer one, so only
    the terminating NUL is required after the name.
    """
    import llama_cpp
    from comfy_llm_profiles._gguf_rules import TEXT_ARCHITECTURES, VISION_PROJECTORS

    lib = Path(llama_cpp.__file__).parent / "lib"
    llama = next(lib.glob("libllama.*")).read_bytes()
    mtmd = next(lib.glob("libmtmd.*")).read_bytes()
    for name in TEXT_ARCHITECTURES:
        assert name.encode() + b"\0" in llama, name
    for name in VISION_PROJECTORS:
        assert name.encode() + b"\0" in mtmd, name


def test_refusal_never_imports_llama_cpp(tmp_path: Path) -> None:
    """A refused file stops before the engine module is even imported."""
    hostile = next(v for v in hostile_model_variants(_MODEL) if v.name == "aliased-offset")
    path = tmp_path / "model.gguf"
    path.write_bytes(hostile.content)
    code = (
        "import sys\n"
        "from comfy_llm_backend_llamacpp import LlamaCppBackend, UnsafeGgufError\n"
        f"try:\n    LlamaCppBackend.open({str(path)!r})\n"
        "except UnsafeGgufError as e:\n    print('refused', e.reason)\n"
        "print('llama_cpp' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == [
        "refused tensor 'token_embd.weight' claims offset 0, but the previous tensors end at "
        "104960 (tensors must follow each other, aligned to 32)",
        "False",
    ]
