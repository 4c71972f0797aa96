"""GGUF files through the node and the CLI on the real llama.cpp (the CPU build).

The tiny SmolVLM as a GGUF pair (``comfy_llm_testworld.gguf_checkpoints``:
model + mmproj, converted as llama.cpp's own converter does) sits where
users keep them: ComfyUI's ``models/LLM``, ``models/text_encoders``, LM
Studio's ``<publisher>/<repository>/`` folder. It is listed in the picker,
resolved to a ``llama_cpp`` profile (checked where it enters), used in place
and describes an image. Hostile files are refused before llama.cpp sees them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from comfy_llm._cli import main
from comfy_llm_testworld import FakeHub
from comfy_llm_testworld.checkpoints import SCRIPTED_ANSWER
from comfy_llm_testworld.gguf_checkpoints import GGUF_MMPROJ_NAME, write_gguf_pair
from comfy_llm_testworld.gguf_hostile import hostile_model_variants

from .conftest import node_raises

pytestmark = pytest.mark.slow

MODEL = "tiny-smolvlm-Q8_0.gguf"


def _execute(**kwargs: Any) -> tuple[str, dict[str, Any], str]:
    from comfy_api.latest import io
    from comfy_llm._comfyui._modal_llm import ModalLLMNode

    ModalLLMNode.hidden = io.HiddenHolder(unique_id="9")
    kwargs.setdefault("temperature", 0.0)
    kwargs.setdefault("prompt", "Describe the image.")
    response, metadata_json, reasoning = ModalLLMNode.execute(**kwargs).args
    return response, json.loads(metadata_json), reasoning


@pytest.fixture
def cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMFY_LLM_EXECUTION_TARGET", "local_cpu")


def _models() -> Path:
    return Path(os.environ["COMFYUI_STANDIN_BASE"]) / "models"  # folder_paths.models_dir


def test_a_gguf_in_models_llm_describes_an_image_through_the_node(
    cpu: None, hf_env: FakeHub, storage: Path, comfyui: Path
) -> None:
    from comfy_llm._picker import model_choices

    folder = _models() / "LLM" / "tiny-smolvlm-GGUF"
    write_gguf_pair(folder, scripted=True, quantization="Q8_0")
    reference = f"models/LLM/tiny-smolvlm-GGUF/{MODEL}"
    assert reference in model_choices("smolvlm-256m-instruct")  # the picker lists it
    assert f"models/LLM/tiny-smolvlm-GGUF/{GGUF_MMPROJ_NAME}" not in model_choices("x")
    image = np.random.default_rng(0).random((1, 32, 32, 3), dtype=np.float32)

    response, metadata, _ = _execute(model_profile=reference, images=image)

    assert SCRIPTED_ANSWER in response
    assert metadata["backend"] == "llama_cpp"
    assert metadata["engine"] == "llama.cpp"
    assert metadata["model_source"] == "local"
    assert metadata["snapshot_downloaded"] is False
    assert metadata["gguf_file"] == MODEL and metadata["mmproj_file"] == GGUF_MMPROJ_NAME
    assert metadata["quantization"] == "Q8_0"
    assert metadata["gpu_offload"] == "none"
    assert metadata["image_count"] == 1
    assert hf_env.requests == []
    assert not list(storage.rglob("*.gguf"))  # used in place, never copied


def test_text_encoders_and_lm_studio_folders_are_found(
    cpu: None, storage: Path, comfyui: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from comfy_llm._catalogue import list_models, picker_choices
    from comfy_llm_core import ExecutionTarget

    write_gguf_pair(_models() / "text_encoders", quantization="Q8_0")
    lmstudio = tmp_path / "lmstudio-models"
    write_gguf_pair(lmstudio / "ggml-org" / "tiny-smolvlm-GGUF", quantization="Q8_0")
    monkeypatch.setenv("COMFY_LLM_LMSTUDIO_MODELS", str(lmstudio))

    values = [c.value for c in picker_choices(storage, ExecutionTarget.LOCAL_CPU)]
    assert f"models/text_encoders/{MODEL}" in values
    assert f"models/lmstudio/ggml-org/tiny-smolvlm-GGUF/{MODEL}" in values
    listed = {c.reference: c for c in list_models(storage, ExecutionTarget.LOCAL_CPU)}
    choice = listed[f"models/lmstudio/ggml-org/tiny-smolvlm-GGUF/{MODEL}"]
    assert choice.compatible is True
    assert choice.reason == f"llama_cpp, smolvlm, Q8_0 + {GGUF_MMPROJ_NAME}"

    response, metadata, _ = _execute(
        model_profile=f"models/lmstudio/ggml-org/tiny-smolvlm-GGUF/{MODEL}", prompt="hi"
    )
    assert response and metadata["backend"] == "llama_cpp"


def test_a_hostile_gguf_is_refused_on_one_line_before_llama_cpp(
    cpu: None, storage: Path, comfyui: Path
) -> None:
    folder = _models() / "LLM" / "evil"
    pair = write_gguf_pair(folder, quantization="Q8_0")
    from comfy_llm_profiles import UnsafeGgufError

    variants = hostile_model_variants(pair.model.read_bytes())
    variant = next(v for v in variants if v.name == "huge-metadata-count")
    pair.model.write_bytes(variant.content)
    with node_raises(UnsafeGgufError) as failure:
        _execute(model_profile=f"models/LLM/evil/{MODEL}")
    message = str(failure.shown)
    assert "Refused GGUF file" in message and MODEL in message and variant.reason in message
    assert "\n" not in message


def test_the_cli_resolves_and_runs_a_gguf_file(
    hf_env: FakeHub, storage: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pair = write_gguf_pair(tmp_path / "LM Studio" / "tiny", scripted=True, quantization="Q8_0")
    image = tmp_path / "red.png"
    from PIL import Image

    Image.new("RGB", (32, 32), (200, 30, 30)).save(image)
    assert main(["resolve", str(pair.model), "--target", "local_cpu", "--json"]) == 0
    resolved = json.loads(capsys.readouterr().out)
    assert resolved["backend"] == "llama_cpp" and len(resolved["revision"]) == 64
    argv = ["run", "--model", str(pair.model), "--prompt", "Describe it.", "--image", str(image)]
    argv += ["--target", "local_cpu", "--temperature", "0", "--max-new-tokens", "16", "--json"]
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    ran = json.loads(captured.out)
    assert SCRIPTED_ANSWER in ran["response"]
    assert ran["metadata"]["backend"] == "llama_cpp"
    assert ran["metadata"]["image_count"] == 1
    assert hf_env.requests == []
