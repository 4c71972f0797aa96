"""The image stands where the request puts it, whatever MLX-VLM's table says.

MLX-VLM 0.7.10 places the image per model type when it is told only how
many come (``mlx_vlm/prompt_utils.py:33-130`` ``MODEL_CONFIG``): Qwen2-VL
(``:45``, ``LIST_WITH_IMAGE``) after the text (``:480``), Gemma 3 (``:77``,
``START_IMAGE_TOKEN``) with ``<start_of_image>`` after it (``:396-397``,
``:577``), Qwen2.5-VL (``:46``) before. Typed image parts keep their place
(``_content_parts``, ``:434-451``). Transformers and vLLM render the
checkpoint's template with the image where the part stands (media first, then
the prompt: ``PreparedInputs.parts``), so the same request must mean the same
prompt on MLX: the backend's greedy ids equal MLX-VLM's own for that prompt.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_backend_mlx import create_backend
from comfy_llm_core import ExecutionTarget
from comfy_llm_inputs import ImagePart, PreparedInputs, TextPart, chat_messages
from comfy_llm_residency.backend import GenerationSettings
from comfy_llm_testworld import FakeHub
from comfy_llm_testworld.families import build_family_files
from comfy_llm_testworld.sinks import RecordingSink
from comfy_llm_testworld.staged import staged_profile
from PIL import Image

pytestmark = pytest.mark.slow

GREEDY = GenerationSettings(max_new_tokens=4, temperature=0.0, top_p=1.0, seed=0)
PROMPT = "Describe the image."
IMAGE_SIDE = {"gemma3": 64}  # one tile (the builder's size)
# Only families whose tiny checkpoint tells the two orders apart prove anything here:
# Qwen2-VL's (LIST_WITH_IMAGE, image after the text) greedily writes the same four ids
# either way, so it is not listed; Gemma 3's does not.
AFTER_THE_TEXT = ["gemma3"]


@pytest.fixture(scope="module")
def hub() -> Iterator[FakeHub]:
    with FakeHub() as fake:
        yield fake


def _staged(hub: FakeHub, root: Path, kind: str) -> tuple[Any, Path]:
    repository = f"tiny/{kind}"
    hub.add_repo(repository, build_family_files(kind))
    return staged_profile(
        repository, ExecutionTarget.LOCAL_APPLE, storage_root=root, endpoint=hub.endpoint
    )


def _mlx_ids(mlx: tuple[Any, Any], prompt: str, image: Image.Image) -> list[int]:
    from mlx_vlm import generate

    model, processor = mlx
    result = generate(
        model, processor, prompt, image=[image], max_tokens=4, temperature=0.0, verbose=False
    )
    return [int(token) for token in result.token_ids]


def _template(mlx: tuple[Any, Any], messages: list[dict[str, Any]]) -> str:
    """The checkpoint's template over ``messages`` as they stand (MLX-VLM's last step)."""
    from mlx_vlm.prompt_utils import get_chat_template

    return str(get_chat_template(mlx[1], messages, add_generation_prompt=True))


@pytest.mark.parametrize("kind", AFTER_THE_TEXT)
def test_the_image_stays_before_the_text_on_models_mlx_puts_it_after(
    hub: FakeHub, tmp_path: Path, kind: str
) -> None:
    profile, path = _staged(hub, tmp_path, kind)
    from mlx_vlm import load

    side = IMAGE_SIDE[kind]
    pixels = bytes((index * 3) % 251 for index in range(side * side * 3))
    image = Image.frombytes("RGB", (side, side), pixels)
    inputs = PreparedInputs(parts=(ImagePart(image), TextPart(PROMPT)))
    mlx = load(str(path), trust_remote_code=False)
    image_first = _template(mlx, chat_messages(inputs))
    text_first = _template(mlx, [{"role": "user", "content": _content(inputs)[::-1]}])
    assert image_first.index(PROMPT) > text_first.index(PROMPT)  # two different prompts
    expected = _mlx_ids(mlx, image_first, image)
    assert expected != _mlx_ids(mlx, text_first, image)  # ... that this model tells apart
    del mlx

    backend = create_backend(profile, path, lambda event: None)
    try:
        result = backend.generate(inputs, GREEDY, RecordingSink())
    finally:
        backend.unload()

    assert list(result.token_ids) == expected


def _content(inputs: PreparedInputs) -> list[dict[str, Any]]:
    return list(chat_messages(inputs)[-1]["content"])
