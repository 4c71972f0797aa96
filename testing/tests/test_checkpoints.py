"""The tiny-checkpoint factory: layout, size, and real engines on CPU.

Transformers runs in this process. MLX-VLM runs in one subprocess for the
whole module: importing ``mlx_vlm.models.smolvlm`` replaces
``transformers.AutoProcessor.from_pretrained`` process-wide (SmolVLM then
gets MLX-VLM's own processor, which returns ``mx.array``s), which would
break every later Transformers test in this process.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest
from comfy_llm_testworld import checkpoints
from comfy_llm_testworld.checkpoints import (
    CHECKPOINT_KINDS,
    SCRIPTED_ANSWER,
    SCRIPTED_REASONING,
    build_checkpoint_files,
    end_token,
    scripted_pieces,
    scripted_text,
    think_token_ids,
    write_checkpoint,
)

MAX_NEW_TOKENS = 8
SIZE = 32

# (case name, kind, scripted, number of images, enable_thinking)
CASES = [
    ("qwen3_5-random-1img", "qwen3_5", False, 1, True),
    ("smolvlm-random-1img", "smolvlm", False, 1, True),
    ("smolvlm-random-3frames", "smolvlm", False, 3, False),
    *[
        (f"{kind}-scripted-think{int(thinking)}", kind, True, 1, thinking)
        for kind in CHECKPOINT_KINDS
        for thinking in (True, False)
    ],
]
CASE_IDS = [case[0] for case in CASES]
SCRIPTED_CASES = [case for case in CASES if case[2]]


def _image(index: int):
    """A deterministic RGB test image (distinct per index)."""
    import numpy as np
    from PIL import Image

    pixels = (np.arange(SIZE * SIZE * 3).reshape(SIZE, SIZE, 3) * (index + 3)) % 251
    return Image.fromarray(pixels.astype("uint8"))


@pytest.fixture(scope="module")
def checkpoint_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, bool], Path]:
    root = tmp_path_factory.mktemp("checkpoints")
    return {
        (kind, scripted): write_checkpoint(
            kind, root / f"{kind}-{'scripted' if scripted else 'random'}", scripted=scripted
        )
        for kind in CHECKPOINT_KINDS
        for scripted in (False, True)
    }


# ---------------------------------------------------------------- light checks


def test_import_does_not_pull_torch() -> None:
    code = (
        "import sys, comfy_llm_testworld.checkpoints as c; "
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules, 'heavy import'; "
        "print(c.SCRIPTED_REASONING)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "a b"


def test_scripted_sequences_are_documented() -> None:
    assert SCRIPTED_REASONING == "a b"
    assert SCRIPTED_ANSWER == "answer"
    assert scripted_pieces("qwen3_5", enable_thinking=True) == (
        " a",
        " b",
        "</think>",
        " answer",
        "<|im_end|>",
    )
    assert scripted_pieces("smolvlm", enable_thinking=False) == (
        "<think>",
        " a",
        " b",
        "</think>",
        " answer",
        "<end_of_utterance>",
    )
    assert scripted_text("qwen3_5", enable_thinking=True) == " a b</think> answer"
    assert scripted_text("smolvlm", enable_thinking=False) == "<think> a b</think> answer"
    for kind in CHECKPOINT_KINDS:
        text = scripted_text(kind, enable_thinking=False)
        reasoning, answer = text.removeprefix("<think>").split("</think>")
        assert (reasoning.strip(), answer.strip()) == (SCRIPTED_REASONING, SCRIPTED_ANSWER)


def test_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown checkpoint kind"):
        build_checkpoint_files("llama")  # type: ignore[arg-type]


def test_tokenizer_pieces_are_single_tokens() -> None:
    from comfy_llm_testworld._ckpt_tokenizer import QWEN_SPEC, SMOLVLM_SPEC, train_tokenizer

    for spec in (QWEN_SPEC, SMOLVLM_SPEC):
        tokenizer = train_tokenizer(spec)
        encoded = tokenizer.encode("<think> a b</think> answer\n\n", add_special_tokens=False)
        assert encoded.tokens == ["<think>", "Ġa", "Ġb", "</think>", "Ġanswer", "ĊĊ"]
        assert 300 <= tokenizer.get_vocab_size() <= 500


# ------------------------------------------------------- files, in-process


@pytest.mark.slow
@pytest.mark.parametrize("kind", CHECKPOINT_KINDS)
def test_files_layout_and_config_facts(kind: str) -> None:
    files = build_checkpoint_files(kind)  # type: ignore[arg-type]
    expected = {
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        "chat_template.jinja",
        "preprocessor_config.json",
        "video_preprocessor_config.json",
    }
    if kind == "smolvlm":
        expected.add("processor_config.json")
    assert set(files) == expected
    assert len(files["model.safetensors"]) < 2 * 1024 * 1024
    assert len(build_checkpoint_files(kind, scripted=True)["model.safetensors"]) < 2 * 1024 * 1024  # type: ignore[arg-type]

    config = json.loads(files["config.json"])
    text = config["text_config"]
    tokenizer = json.loads(files["tokenizer.json"])
    full_vocab = len(tokenizer["model"]["vocab"]) + len(tokenizer["added_tokens"])
    assert text["vocab_size"] == full_vocab
    assert text["rope_theta"] == text["rope_parameters"]["rope_theta"]
    if kind == "qwen3_5":
        assert text["layer_types"] == ["linear_attention", "full_attention"]
        assert text["full_attention_interval"] == 2

    added = {token["content"]: token for token in tokenizer["added_tokens"]}
    for tag in ("<think>", "</think>"):
        assert added[tag]["special"] is False
    assert added[end_token(kind)]["special"] is True  # type: ignore[arg-type]
    assert think_token_ids(files) == (added["<think>"]["id"], added["</think>"]["id"])


@pytest.mark.slow
def test_build_is_cached_and_deterministic(checkpoint_dirs: dict) -> None:
    first = {kind: build_checkpoint_files(kind, scripted=True) for kind in CHECKPOINT_KINDS}
    assert build_checkpoint_files("qwen3_5", scripted=True) is not first["qwen3_5"]
    checkpoints._build.cache_clear()
    checkpoints._random_tensors.cache_clear()
    checkpoints._tokenizer.cache_clear()
    for kind in CHECKPOINT_KINDS:
        assert build_checkpoint_files(kind, scripted=True) == first[kind]
    assert think_token_ids(checkpoint_dirs["qwen3_5", True]) == think_token_ids(first["qwen3_5"])


# ---------------------------------------------------------- Transformers


def _auto_processor_from_pretrained():
    """``AutoProcessor.from_pretrained`` without MLX-VLM's process-wide patches.

    Another test module may have imported MLX-VLM in this process already;
    its patch would hand SmolVLM an MLX processor. Unwrap to the original.
    """
    from transformers import AutoProcessor

    func = AutoProcessor.__dict__["from_pretrained"].__func__
    while func.__name__ == "_patched_auto_processor_from_pretrained":
        cells = dict(zip(func.__code__.co_freevars, func.__closure__ or (), strict=True))
        func = cells["previous_from_pretrained"].cell_contents.__func__
    return types.MethodType(func, AutoProcessor)


def _transformers_generate(path: Path, images: int, thinking: bool) -> tuple[str, list[int]]:
    import torch
    from transformers import AutoModelForImageTextToText

    processor = _auto_processor_from_pretrained()(
        path, local_files_only=True, trust_remote_code=False
    )
    model = AutoModelForImageTextToText.from_pretrained(
        path, local_files_only=True, trust_remote_code=False
    )
    content = [{"type": "image"}] * images + [{"type": "text", "text": "describe the image"}]
    messages = [{"role": "user", "content": content}]
    prompt = processor.apply_chat_template(
        messages, add_generation_prompt=True, enable_thinking=thinking
    )
    inputs = processor(
        text=[prompt], images=[_image(i) for i in range(images)], return_tensors="pt"
    )
    with torch.inference_mode():
        output = model.generate(**inputs, max_new_tokens=MAX_NEW_TOKENS, do_sample=False)
    return prompt, output[0, inputs["input_ids"].shape[1] :].tolist()


@pytest.fixture(scope="module")
def transformers_results(checkpoint_dirs: dict) -> dict[str, tuple[str, list[int]]]:
    return {
        name: _transformers_generate(checkpoint_dirs[kind, scripted], images, thinking)
        for name, kind, scripted, images, thinking in CASES
    }


@pytest.mark.slow
@pytest.mark.parametrize(("name", "kind", "scripted", "images", "thinking"), CASES, ids=CASE_IDS)
def test_transformers_generates(
    transformers_results: dict, name: str, kind: str, scripted: bool, images: int, thinking: bool
) -> None:
    prompt, ids = transformers_results[name]
    assert prompt.endswith("<think>\n" if thinking else "<think>\n\n</think>\n\n")
    assert 0 < len(ids) <= MAX_NEW_TOKENS
    if scripted:
        _assert_scripted(kind, thinking, ids)


def _expected_ids(kind: str, thinking: bool) -> list[int]:
    from tokenizers import Tokenizer

    files = build_checkpoint_files(kind)  # type: ignore[arg-type]
    tokenizer = Tokenizer.from_str(files["tokenizer.json"].decode("utf-8"))
    pieces = scripted_pieces(kind, enable_thinking=thinking)  # type: ignore[arg-type]
    return [tokenizer.encode(piece, add_special_tokens=False).ids[0] for piece in pieces]


def _assert_scripted(kind: str, thinking: bool, ids: list[int]) -> None:
    from tokenizers import Tokenizer

    assert ids == _expected_ids(kind, thinking)
    files = build_checkpoint_files(kind)  # type: ignore[arg-type]
    tokenizer = Tokenizer.from_str(files["tokenizer.json"].decode("utf-8"))
    text = tokenizer.decode(ids, skip_special_tokens=True)
    assert text == scripted_text(kind, enable_thinking=thinking)  # type: ignore[arg-type]


# --------------------------------------------------------------- MLX-VLM

_MLX_PROBE = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from PIL import Image
    from mlx_vlm import generate, load
    from mlx_vlm.prompt_utils import apply_chat_template

    cases = json.loads(sys.argv[1])
    size, max_tokens = cases.pop("_size"), cases.pop("_max_tokens")

    def image(index):
        pixels = (np.arange(size * size * 3).reshape(size, size, 3) * (index + 3)) % 251
        return Image.fromarray(pixels.astype("uint8"))

    loaded, results = {}, {}
    for name, (path, images, thinking) in cases.items():
        if path not in loaded:
            loaded[path] = load(path)
        model, processor = loaded[path]
        prompt = apply_chat_template(
            processor, model.config, "describe the image",
            num_images=images, enable_thinking=thinking,
        )
        result = generate(
            model, processor, prompt, image=[image(i) for i in range(images)],
            max_tokens=max_tokens, temperature=0.0, verbose=False,
        )
        results[name] = [prompt, [int(t) for t in result.token_ids]]
    print("RESULTS " + json.dumps(results))
    """
)


@pytest.fixture(scope="module")
def mlx_results(checkpoint_dirs: dict) -> dict[str, list]:
    # The dev group always installs mlx-vlm (+ mlx[cpu]); its absence is a setup error.
    assert importlib.util.find_spec("mlx_vlm") is not None, "mlx-vlm is missing: run uv sync"
    cases: dict[str, object] = {
        name: [str(checkpoint_dirs[kind, scripted]), images, thinking]
        for name, kind, scripted, images, thinking in CASES
    }
    cases.update(_size=SIZE, _max_tokens=MAX_NEW_TOKENS)
    proc = subprocess.run(
        [sys.executable, "-c", _MLX_PROBE, json.dumps(cases)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULTS ")]
    assert proc.returncode == 0 and lines, f"mlx probe failed:\n{proc.stdout}\n{proc.stderr}"
    return json.loads(lines[-1].removeprefix("RESULTS "))


@pytest.mark.slow
@pytest.mark.parametrize(("name", "kind", "scripted", "images", "thinking"), CASES, ids=CASE_IDS)
def test_mlx_generates_like_transformers(
    mlx_results: dict,
    transformers_results: dict,
    name: str,
    kind: str,
    scripted: bool,
    images: int,
    thinking: bool,
) -> None:
    prompt, ids = mlx_results[name]
    assert 0 < len(ids) <= MAX_NEW_TOKENS
    # same prompt, same greedy tokens: the checkpoint means the same to both engines
    assert (prompt, ids) == tuple(transformers_results[name])
    if scripted:
        _assert_scripted(kind, thinking, ids)
