"""The vLLM backend's prompt rendering with a real processor (no engine needed).

vLLM is handed the text the processor's chat template writes, so the
template quirks the Transformers path handles must be handled here too:
JoyCaption Beta One's template reads ``content`` as a string and writes the
image tokens itself (reviews/llava.md). The engine run of the same checkpoint
is in ``testing/vllm_tests/test_captioner_cli.py`` (``llava_joycaption``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from comfy_llm_backend_cuda._processor import load_processor
from comfy_llm_backend_cuda.transformers._messages import encode_prompt
from comfy_llm_backend_cuda.vllm import VllmBackend
from comfy_llm_backend_cuda.vllm._requests import EnginePrompt, engine_prompt
from comfy_llm_core import ExecutionTarget
from comfy_llm_inputs import ImagePart, PreparedInputs, TextPart
from comfy_llm_profiles import resolve_profile
from comfy_llm_residency.backend import GenerationSettings
from comfy_llm_testworld import FakeHub
from comfy_llm_testworld.families import build_family_files, family_spec, write_family_checkpoint
from PIL import Image

pytestmark = pytest.mark.slow


def test_vllm_renders_a_template_that_reads_content_as_a_string(
    hf_env: FakeHub, tmp_path: Path
) -> None:
    import transformers

    hf_env.add_repo("tiny/joycaption", build_family_files("llava_joycaption"))
    profile = resolve_profile(
        "tiny/joycaption",
        ExecutionTarget.LOCAL_CUDA,
        storage_root=tmp_path / "storage",
        endpoint=hf_env.endpoint,
        backends=("vllm", "transformers"),
    ).profile
    assert profile.backend == "vllm"  # LLaVA (JoyCaption included) is vLLM-first on CUDA
    path = write_family_checkpoint("llava_joycaption", tmp_path / "checkpoint")
    backend = VllmBackend(profile, path, vllm=None)
    backend._processor = load_processor(transformers, profile, path)  # what load() does
    inputs = PreparedInputs(
        system_prompt="Be brief.",
        parts=(ImagePart(Image.new("RGB", (40, 30), "red")), TextPart("Describe the image.")),
    )
    settings = GenerationSettings(max_new_tokens=4, temperature=0.0, seed=0)

    rendered, images = backend._render(inputs, settings, max_pixels=56 * 56)

    marker = family_spec("llava_joycaption").image_marker
    assert rendered.count(marker) == 1  # the template wrote the image tokens once
    assert rendered.index("Be brief.") < rendered.index(marker)
    assert rendered.endswith(f"{marker}Describe the image.<|eot_id|>" + _generation_prompt())
    assert [image.size for image in images] == [(40, 30)]
    # the same text the Transformers path renders for the same request
    encoded = encode_prompt(backend._processor, inputs, {})
    assert rendered == encoded.text
    # the template wrote <|begin_of_text|> and the tokenizer adds one too: vLLM is told
    # not to add it (its raw-prompt default), the Transformers path does the same
    tokenizer = backend._processor.tokenizer
    request = engine_prompt(rendered, images, tokenizer)
    assert request.prompt == {"prompt": rendered, "multi_modal_data": {"image": images}}
    assert request.tokenization == {"add_special_tokens": False}
    bos_id = tokenizer.bos_token_id
    assert tokenizer(rendered)["input_ids"].count(bos_id) == 2  # vLLM's default: two
    assert tokenizer(rendered, **request.tokenization)["input_ids"].count(bos_id) == 1
    assert encoded.tensors["input_ids"][0].tolist().count(bos_id) == 1


def test_a_template_without_the_bos_keeps_vllms_tokenization(tmp_path: Path) -> None:
    import transformers

    path = write_family_checkpoint("qwen2_5_vl", tmp_path / "checkpoint")
    processor = transformers.AutoProcessor.from_pretrained(path, local_files_only=True)
    rendered = processor.apply_chat_template(
        [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        tokenize=False,
        add_generation_prompt=True,
    )
    assert engine_prompt(rendered, [], processor.tokenizer) == EnginePrompt(
        {"prompt": rendered}, None
    )


def _generation_prompt() -> str:
    return "<|start_header_id|>assistant<|end_header_id|>\n\n"
