"""The family checkpoint builders on real engines: Transformers in-process, MLX-VLM apart.

Every builder must load through ``AutoProcessor`` and its auto model class
with the real repositories' tensor names (no missing or unexpected weight),
render its chat template with the image where the part stands, expand it in
the processor and generate on the CPU. The engines' verdicts in
:data:`comfy_llm_testworld.families` are checked both ways: MLX-VLM must run
every family it is said to run, and must still fail, for the stated reason,
on the others (so the table changes when an engine does).

MLX-VLM runs in one subprocess for the module: importing some of its model
modules replaces ``AutoProcessor.from_pretrained`` process-wide.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_testworld.families import (
    FAMILY_KINDS,
    build_family_files,
    family_spec,
    rendered_template,
    write_family_checkpoint,
)

MAX_NEW_TOKENS = 4
PROMPT = "Describe the image."

#: Image side per family: the smallest the processor maps to a few tokens
#: (Phi-4-multimodal's processor counts tokens for 448 px crops only).
IMAGE_SIDE = {"phi4_multimodal": 448, "gemma3": 64, "lfm2_vl": 64, "florence2": 32}

#: Why MLX-VLM 0.7.10 fails on the families it does not run (a phrase of its error).
MLX_FAILURES = {
    "llava": "unexpected keyword argument 'padding'",
    # its chat template reads content as a string; MLX-VLM hands it typed parts first
    "llava_joycaption": "'list object' has no attribute 'replace'",
    "internvl": "required positional argument: 'head_dim'",
    "phi4_multimodal": "Model type phi4_multimodal not supported",
    "florence2": "AssertionError",
}


def _image(side: int, index: int = 0) -> Any:
    import numpy as np
    from PIL import Image

    pixels = (np.arange(side * side * 3).reshape(side, side, 3) * (index + 3)) % 251
    return Image.fromarray(pixels.astype("uint8"))


def _messages(kind: str) -> list[dict[str, Any]]:
    """The conversation each family's template expects.

    JoyCaption's template writes the image tokens itself into the first user
    turn and reads ``content`` as a string; the others take typed parts.
    """
    if kind == "llava_joycaption":
        return [{"role": "user", "content": PROMPT}]
    return [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": PROMPT}]}]


@pytest.fixture(scope="module")
def family_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("families")
    dirs = {kind: write_family_checkpoint(kind, root / kind) for kind in FAMILY_KINDS}
    dirs["glm4v-scripted"] = write_family_checkpoint("glm4v", root / "glm4v-s", scripted=True)
    return dirs


# ---------------------------------------------------------------- light checks


def test_import_does_not_pull_torch() -> None:
    code = (
        "import sys, comfy_llm_testworld.families as f; f.family_spec('gemma3'); "
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules, 'heavy'; "
        "print(len(f.FAMILY_KINDS))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(len(FAMILY_KINDS))


def test_unknown_kind_and_missing_script_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown family kind"):
        family_spec("llama")
    with pytest.raises(ValueError, match="no scripted variant"):
        build_family_files("gemma3", scripted=True)


@pytest.mark.parametrize("kind", FAMILY_KINDS)
def test_every_engine_verdict_is_explained(kind: str) -> None:
    spec = family_spec(kind)
    assert set(spec.engines) == {"transformers", "mlx_vlm", "vllm"}
    for engine, reason in spec.engines.items():
        # a refusal names the installed source it comes from
        assert reason == "" or ".py" in reason, (kind, engine)
    assert spec.supported("transformers")


# ------------------------------------------------------- files, in-process


@pytest.mark.slow
@pytest.mark.parametrize("kind", FAMILY_KINDS)
def test_files_are_a_real_repository_layout(kind: str) -> None:
    spec = family_spec(kind)
    files = build_family_files(kind)
    for name in ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json"):
        assert name in files
    assert "tokenizer_config.json" in files and "preprocessor_config.json" in files
    assert (spec.template_file == "") == all(not n.startswith("chat_template") for n in files)
    assert len(files["model.safetensors"]) < 2 * 1024 * 1024
    config = json.loads(files["config.json"])
    assert (config["architectures"], config["model_type"]) == ([spec.architecture], kind_type(kind))
    assert "auto_map" not in json.dumps(config)  # nothing here needs remote code
    tokenizer = json.loads(files["tokenizer.json"])
    full_vocab = len(tokenizer["model"]["vocab"]) + sum(
        token["content"] not in tokenizer["model"]["vocab"] for token in tokenizer["added_tokens"]
    )
    # MLX-VLM crashes on ids it cannot detokenize: the model's vocab is the tokenizer's
    text = config.get("text_config", config)
    assert text["vocab_size"] == full_vocab


def kind_type(kind: str) -> str:
    return family_spec(kind).model_type


@pytest.mark.slow
def test_build_is_deterministic() -> None:
    from comfy_llm_testworld import families

    first = build_family_files("qwen2_5_vl")
    families._build.cache_clear()
    families._tokenizer.cache_clear()
    assert build_family_files("qwen2_5_vl") == first


# ---------------------------------------------------------- Transformers


def _auto_processor() -> Any:
    """``AutoProcessor.from_pretrained`` without MLX-VLM's process-wide patches."""
    from transformers import AutoProcessor

    func = AutoProcessor.__dict__["from_pretrained"].__func__
    while func.__name__ == "_patched_auto_processor_from_pretrained":
        cells = dict(zip(func.__code__.co_freevars, func.__closure__ or (), strict=True))
        func = cells["previous_from_pretrained"].cell_contents.__func__
    return types.MethodType(func, AutoProcessor)


def _render(processor: Any, kind: str, **template: Any) -> str:
    """The chat-template text (Phi-4-multimodal's processor drops its template: the tokenizer's)."""
    if kind == "florence2":
        return "<CAPTION>"
    owner = processor if processor.chat_template else processor.tokenizer
    return str(
        owner.apply_chat_template(
            _messages(kind), tokenize=False, add_generation_prompt=True, **template
        )
    )


def _transformers_run(
    path: Path, kind: str, max_new_tokens: int = MAX_NEW_TOKENS, **template: Any
) -> tuple[str, list[int], Any]:
    import torch
    import transformers

    spec = family_spec(kind)
    processor = _auto_processor()(path, local_files_only=True, trust_remote_code=False)
    model, info = getattr(transformers, spec.auto_class).from_pretrained(
        path, local_files_only=True, trust_remote_code=False, output_loading_info=True
    )
    # the real repositories' names: every tensor used, none left over
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    prompt = _render(processor, kind, **template)
    side = IMAGE_SIDE.get(kind, 56)
    images: Any = _image(side) if kind == "florence2" else [[_image(side)]]
    call: dict[str, Any] = {"text": [prompt], "images": images, "return_tensors": "pt"}
    bos = processor.tokenizer.bos_token
    if bos and prompt.startswith(bos):
        call["add_special_tokens"] = False  # the template wrote it; never twice
    inputs = processor(**call)
    with torch.inference_mode():
        output = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False)
    start = 0 if model.config.is_encoder_decoder else inputs["input_ids"].shape[1]
    return prompt, output[0, start:].tolist(), inputs


@pytest.fixture(scope="module")
def transformers_results(family_dirs: dict[str, Path]) -> dict[str, tuple[str, list[int], Any]]:
    return {kind: _transformers_run(family_dirs[kind], kind) for kind in FAMILY_KINDS}


@pytest.mark.slow
@pytest.mark.parametrize("kind", FAMILY_KINDS)
def test_transformers_places_the_image_and_generates(transformers_results: dict, kind: str) -> None:
    spec = family_spec(kind)
    prompt, ids, inputs = transformers_results[kind]
    if spec.template_file:
        # the template writes the family's marker once, where the image part stands,
        # and ends on the generation prompt
        assert prompt.count(spec.image_marker) == 1, prompt
        assert prompt.index(spec.image_marker) < prompt.index(PROMPT)
        assert prompt.endswith(spec.generation_prompt)
    # the processor expanded the marker into image tokens the model consumed
    config = json.loads(build_family_files(kind)["config.json"])
    image_id = config.get("image_token_id", config.get("image_token_index"))
    image_id = image_id or config["vision_config"]["image_token_id"]  # Phi-4-multimodal
    assert int((inputs["input_ids"] == image_id).sum()) >= 1
    assert 0 < len(ids) <= MAX_NEW_TOKENS + 1  # an encoder-decoder's start token included


@pytest.mark.slow
@pytest.mark.parametrize("kind", [k for k in FAMILY_KINDS if family_spec(k).video_marker])
def test_video_is_placed_where_the_part_stands(family_dirs: dict[str, Path], kind: str) -> None:
    import numpy as np

    spec = family_spec(kind)
    processor = _auto_processor()(family_dirs[kind], local_files_only=True)
    messages = [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": PROMPT}]}]
    prompt = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert prompt.count(spec.video_marker) == 1
    assert prompt.index(spec.video_marker) < prompt.index(PROMPT)
    frames = np.stack([np.asarray(_image(56, index)) for index in range(4)])
    # four frames as given (GLM-4.1V's processor would otherwise ask for the clip's fps)
    inputs = processor(text=[prompt], videos=[frames], do_sample_frames=False, return_tensors="pt")
    # expanded per frame: video tokens (Qwen2-VL), or image tokens inside the video's
    # markers (GLM-4.1V writes <|begin_of_image|><|image|>*N<|end_of_image|><seconds>,
    # InternVL "Frame1: <img><IMG_CONTEXT>*N</img>")
    config = json.loads(build_family_files(kind)["config.json"])
    visual = {config["image_token_id"], config.get("video_token_id", config["image_token_id"])}
    ids = inputs["input_ids"][0].tolist()
    assert sum(token in visual for token in ids) >= 4  # at least one token per frame


def test_templates_are_what_the_builders_write() -> None:
    for kind in FAMILY_KINDS:
        spec = family_spec(kind)
        if spec.template_file:
            assert rendered_template(kind) == spec.tokenizer.chat_template


# ------------------------------------------------- GLM-4.1V reasoning split


def _glm_pieces(ids: list[int], path: Path) -> list[str]:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
    return [tokenizer.decode([i], skip_special_tokens=False) for i in ids]


@pytest.mark.slow
@pytest.mark.parametrize("thinking", [True, False])
def test_glm4v_reasoning_lands_in_reasoning(family_dirs: dict[str, Path], thinking: bool) -> None:
    from comfy_llm_reasoning import TokenVocabulary, get_parser
    from transformers import AutoTokenizer

    path = family_dirs["glm4v-scripted"]
    prompt, ids, _ = _transformers_run(path, "glm4v", max_new_tokens=8, enable_thinking=thinking)
    # GLM-4.1V opens the block itself; with thinking off the template closes an empty one
    assert prompt.endswith("<|assistant|>" if thinking else "<|assistant|><think></think>")
    opened = ["<think>", " a", " b", "</think>"] if thinking else []
    assert _glm_pieces(ids, path) == [*opened, " answer", "<|user|>"]
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    parser = get_parser("qwen3", TokenVocabulary.from_tokenizer(tokenizer))
    result = parser.parse(ids, tokenizer.decode(ids, skip_special_tokens=True))
    assert (result.reasoning or "").strip() == ("a b" if thinking else "")
    assert result.response.strip() == "answer"


# --------------------------------------------------------------- MLX-VLM

_MLX_PROBE = textwrap.dedent(
    """
    import json, sys, traceback
    import numpy as np
    from PIL import Image
    from mlx_vlm import generate, load
    from mlx_vlm.prompt_utils import apply_chat_template

    cases = json.loads(sys.argv[1])
    results = {}
    for kind, (path, side, prompt_text, max_tokens) in cases.items():
        pixels = (np.arange(side * side * 3).reshape(side, side, 3) * 3) % 251
        image = Image.fromarray(pixels.astype("uint8"))
        try:
            model, processor = load(path, trust_remote_code=False)
            prompt = prompt_text or apply_chat_template(
                processor, model.config, "Describe the image.", num_images=1
            )
            result = generate(
                model, processor, prompt, image=[image], max_tokens=max_tokens,
                temperature=0.0, verbose=False,
            )
            results[kind] = {"prompt": prompt, "ids": [int(t) for t in result.token_ids]}
        except BaseException as error:  # noqa: BLE001 - reported back to the test
            results[kind] = {"error": f"{type(error).__name__}: {error}"}
    print("RESULTS " + json.dumps(results))
    """
)


@pytest.fixture(scope="module")
def mlx_results(family_dirs: dict[str, Path]) -> dict[str, dict[str, Any]]:
    # The dev group always installs mlx-vlm (+ mlx[cpu]); its absence is a setup error.
    assert importlib.util.find_spec("mlx_vlm") is not None, "mlx-vlm is missing: run uv sync"
    cases = {
        kind: [
            str(family_dirs[kind]),
            IMAGE_SIDE.get(kind, 56),
            "<CAPTION>" if kind == "florence2" else "",
            MAX_NEW_TOKENS,
        ]
        for kind in FAMILY_KINDS
    }
    proc = subprocess.run(
        [sys.executable, "-c", _MLX_PROBE, json.dumps(cases)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULTS ")]
    assert proc.returncode == 0 and lines, f"mlx probe failed:\n{proc.stdout}\n{proc.stderr}"
    return dict(json.loads(lines[-1].removeprefix("RESULTS ")))


@pytest.mark.slow
@pytest.mark.parametrize("kind", FAMILY_KINDS)
def test_mlx_runs_what_it_is_said_to_run(mlx_results: dict, kind: str) -> None:
    spec = family_spec(kind)
    result = mlx_results[kind]
    if spec.supported("mlx_vlm"):
        assert "error" not in result, result
        assert 0 < len(result["ids"]) <= MAX_NEW_TOKENS
        assert spec.image_marker in result["prompt"]
    else:
        assert MLX_FAILURES[kind] in result.get("error", ""), result
