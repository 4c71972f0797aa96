"""One BOS on MLX-VLM, where the chat template writes it and the tokenizer adds one.

MLX-VLM 0.7.10 lets the tokenizer add its special tokens for every model type
but the Gemma families (``should_add_special_tokens``,
mlx_vlm/utils.py:2346-2357). Mistral 3's template starts with ``bos_token``
and its tokenizer prepends ``<s>`` as well (the family builder's tokenizer
does, as the real one), so the engine would read two.
And MLX-VLM 0.7.10 forwards ``add_special_tokens`` only to processors whose
signature names it (mlx_vlm/utils.py:1773-1774), which Mistral 3's does not.
The backend's rule (:func:`comfy_llm_backend_mlx._engine.encoded_prompt`, what
both the single and the batch path hand to ``prepare_inputs``) is checked on
MLX-VLM's own rendering and encoding of an image request and of a text-only
one (that path does honour ``add_special_tokens``, utils.py:1848-1860).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from comfy_llm_testworld.families import write_family_checkpoint
from PIL import Image

pytestmark = pytest.mark.slow


def test_the_prompt_mlx_encodes_starts_with_one_bos(tmp_path: Path) -> None:
    from comfy_llm_backend_mlx._engine import encoded_prompt
    from mlx_vlm import load
    from mlx_vlm.prompt_utils import apply_chat_template
    from mlx_vlm.utils import prepare_inputs

    model, processor = load(str(write_family_checkpoint("mistral3", tmp_path / "mistral3")))
    messages = [{"role": "user", "content": "Describe the image."}]
    text = str(apply_chat_template(processor, model.config, messages, num_images=1))
    tokenizer = processor.tokenizer
    assert text.startswith(tokenizer.bos_token)  # the template wrote it
    assert tokenizer("x")["input_ids"][0] == tokenizer.bos_token_id  # and the tokenizer adds it

    for images in ([Image.new("RGB", (56, 56), "red")], None):
        encoded, special = encoded_prompt(model, processor, text)
        prepared = prepare_inputs(
            processor,
            images=images,
            prompts=encoded,
            image_token_index=getattr(model.config, "image_token_index", None),
            add_special_tokens=special,
        )
        ids = prepared["input_ids"][0].tolist()
        assert ids[0] == tokenizer.bos_token_id
        assert ids.count(tokenizer.bos_token_id) == 1, images
