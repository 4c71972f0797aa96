"""One BOS through the vLLM backend, for a template that writes it (issue 29).

JoyCaption's Llama 3.1 template writes ``<|begin_of_text|>`` and its tokenizer
adds one too (the family builder's tokenizer does, as the real one). vLLM
tokenizes a raw prompt with ``add_special_tokens=True``
(multimodal/processing/context.py:524-528), so unless the backend says
otherwise the engine reads two. The prompt the engine tokenized, single
request and batch alike, must be as long as the Transformers engine's
encoding of the same request (one BOS: ``encode_prompt``'s rule).

One tiny LLaVA engine start (eager pinned); it is unloaded at the end so the
tier's Qwen3.5 engines keep their room.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

JOYCAPTION = "tiny/joycaption"


def test_the_engine_reads_one_bos_where_the_template_wrote_it(
    world: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import transformers
    from comfy_llm._pipeline import resolve_and_stage
    from comfy_llm._storage import storage_root
    from comfy_llm_backend_cuda import EXECUTION_MODE_ENV, execution_modes
    from comfy_llm_backend_cuda._processor import load_processor
    from comfy_llm_backend_cuda.transformers._messages import encode_prompt
    from comfy_llm_core import ExecutionTarget, ignore_progress
    from comfy_llm_inputs import ImagePart, PreparedInputs
    from comfy_llm_residency import get_manager
    from comfy_llm_residency.backend import BatchItem, GenerationSettings
    from PIL import Image

    monkeypatch.setenv(EXECUTION_MODE_ENV, "eager")  # a batch would promote auto: one start
    resolved, snapshot = resolve_and_stage(
        JOYCAPTION, ExecutionTarget.LOCAL_CUDA, storage_root(), ignore_progress
    )
    profile, path = resolved.profile, Path(snapshot.path)
    assert profile.backend == "vllm"
    inputs = PreparedInputs.text("Describe the image.", ImagePart(Image.new("RGB", (40, 30))))
    processor = load_processor(transformers, profile, path)
    one_bos = encode_prompt(processor, inputs, {})
    bos = processor.tokenizer.bos_token
    assert (
        one_bos.text.startswith(bos)
        and one_bos.tensors["input_ids"][0].tolist().count(processor.tokenizer.bos_token_id) == 1
    )

    manager: Any = get_manager("local_cuda", backend_factory=None)  # type: ignore[arg-type]
    settings = GenerationSettings(max_new_tokens=2, temperature=0.0, seed=0)
    try:
        single = manager.run(profile, path, inputs, settings)
        batch = manager.run_batch(profile, path, [BatchItem(inputs, settings)] * 2)
        counts = [r.metadata.to_dict()["prompt_tokens"] for r in (single, *batch)]
        assert counts == [one_bos.prompt_tokens] * 3  # two BOS would be one more
    finally:
        manager.evict_for_host(profile.profile_id, "test done")
        execution_modes().reset()
