"""A GGUF model with its vision projector in a real ComfyUI 0.33, on the real llama.cpp.

The tiny SmolVLM as a GGUF pair (``comfy_llm_testworld.gguf_checkpoints``)
is put where users keep GGUF files, ComfyUI's ``models/LLM``; the picker
lists it, and a LoadImage → ModalLLM workflow queued as the frontend queues
it describes the image through llama.cpp with the mmproj. ComfyUI's venv
holds the workspace's own llama-cpp-python build, packed as a wheel by
``scripts/build-comfyui-env.sh`` (no second compile).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from comfy_llm_testworld.checkpoints import SCRIPTED_ANSWER
from comfy_llm_testworld.gguf_checkpoints import (
    GGUF_MMPROJ_NAME,
    GGUF_MODEL_NAME,
    write_gguf_pair,
)
from comfy_llm_testworld.real_comfyui import ComfyUIClient, ComfyUIServer
from PIL import Image

MODEL = GGUF_MODEL_NAME.format(quantization="Q8_0")
REFERENCE = f"models/LLM/tiny-smolvlm-GGUF/{MODEL}"


@pytest.fixture(scope="module", autouse=True)
def _unload_afterwards(client: ComfyUIClient) -> Iterator[None]:
    """Leave no resident model behind: other modules expect their first run cold."""
    yield
    client.free(unload_models=True)


def test_a_gguf_pair_in_models_llm_is_listed_and_describes_an_image(
    client: ComfyUIClient, server: ComfyUIServer, tmp_path: Path
) -> None:
    write_gguf_pair(
        server.root / "models" / "LLM" / "tiny-smolvlm-GGUF", scripted=True, quantization="Q8_0"
    )
    spec = client.object_info("ModalLLM")["input"]["required"]["model_profile"]
    assert REFERENCE in spec[1]["options"]  # listed from models/LLM, not the projector
    assert not [o for o in spec[1]["options"] if "mmproj" in o]
    assert spec[1]["comfy_llm_labels"][REFERENCE].startswith(REFERENCE)

    picture = tmp_path / "tier_red.png"
    Image.new("RGB", (32, 32), (200, 30, 30)).save(picture)
    graph = {
        "1": {"class_type": "LoadImage", "inputs": {"image": client.upload(picture)}},
        "10": {
            "class_type": "ModalLLM",
            "inputs": {
                "prompt": "Describe the image.",
                "model_profile": REFERENCE,
                "images": ["1", 0],
                "temperature": 0.0,
                "max_new_tokens": 16,
                "seed": 0,
            },
        },
        "21": {"class_type": "PreviewAny", "inputs": {"source": ["10", 0]}},
        "22": {"class_type": "PreviewAny", "inputs": {"source": ["10", 1]}},
    }
    run = client.run(graph)

    assert run.status == "execution_success", run.error()
    assert SCRIPTED_ANSWER in run.text_of("21")
    metadata = json.loads(run.text_of("22"))
    assert metadata["backend"] == "llama_cpp" and metadata["engine"] == "llama.cpp"
    assert metadata["gguf_file"] == MODEL and metadata["mmproj_file"] == GGUF_MMPROJ_NAME
    assert metadata["model_source"] == "local" and metadata["image_count"] == 1
