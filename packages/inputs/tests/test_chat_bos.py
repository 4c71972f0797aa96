"""``template_wrote_bos``: the one rule every engine asks before encoding a rendered prompt."""

from __future__ import annotations

import pytest
from comfy_llm_inputs import template_wrote_bos


@pytest.mark.parametrize(
    ("rendered", "bos", "wrote"),
    [
        ("<|begin_of_text|><|start_header_id|>user", "<|begin_of_text|>", True),  # JoyCaption
        ("<s>[INST]Describe.[/INST]", "<s>", True),  # Mistral 3
        ("[INST] <image>\nDescribe. [/INST]", "<s>", False),  # LLaVA-NeXT: the tokenizer's only
        ("<|im_start|>user\nhi", None, False),  # Qwen: no BOS at all
        ("<|im_start|>user\nhi", "", False),
        ("USER: <s> is text here", "<s>", False),  # only where the prompt starts
    ],
)
def test_the_template_wrote_the_bos_only_when_the_prompt_starts_with_it(
    rendered: str, bos: object, wrote: bool
) -> None:
    assert template_wrote_bos(rendered, bos) is wrote
