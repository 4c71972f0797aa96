"""Batches through real vLLM: every request submitted at once, each with its own seed.

Runs after ``test_vllm_engine.py`` and reuses the engines it leaves resident
(the random-weight and the scripted tiny Qwen3.5); run on its own, the first
test loads them.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.slow

RANDOM = "tiny/qwen35"
SCRIPTED = "tiny/qwen35-scripted"


def _resolve(repository: str) -> tuple[Any, Path]:
    from comfy_llm._pipeline import resolve_and_stage
    from comfy_llm._storage import storage_root
    from comfy_llm_core import ExecutionTarget, ignore_progress

    resolved, snapshot = resolve_and_stage(
        repository, ExecutionTarget.LOCAL_CUDA, storage_root(), ignore_progress
    )
    return resolved.profile, Path(snapshot.path)


def _manager() -> Any:
    from comfy_llm_residency import get_manager

    return get_manager("local_cuda", backend_factory=None)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _pinned_eager(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A batch promotes ``auto`` to throughput at once (test_vllm_engine.py shows it); the
    eager engine serves these, as a pinned setting keeps it."""
    from comfy_llm_backend_cuda import EXECUTION_MODE_ENV, execution_modes

    monkeypatch.setenv(EXECUTION_MODE_ENV, "eager")
    yield
    execution_modes().reset()


def _images(count: int) -> Any:
    from PIL import Image

    pixels = np.random.default_rng(21).integers(0, 255, (count, 32, 32, 3), dtype=np.uint8)
    return [Image.fromarray(frame) for frame in pixels]


def _assert_same_answer(single: str, batched: str) -> None:
    """Exact on the CPU; on CUDA exact only under VLLM_BATCH_INVARIANT=1.

    vLLM's GPU kernels are batch-invariant only in that mode
    (docs.vllm.ai/en/v0.32.0/features/batch_invariance/): without it logits
    differ in low bits across batch sizes and a late sampled token may flip,
    so the answers must agree up to at least half of the shorter one.
    """
    import torch

    if not torch.cuda.is_available() or os.environ.get("VLLM_BATCH_INVARIANT") == "1":
        assert batched == single
        return
    shorter = min(len(single), len(batched))
    agree = next(
        (i for i, (a, b) in enumerate(zip(single, batched, strict=False)) if a != b), shorter
    )
    assert agree >= shorter // 2, (single, batched)


def test_a_batch_gives_what_single_runs_with_the_same_seeds_give(world: Path) -> None:
    from comfy_llm_inputs import ImagePart, PreparedInputs
    from comfy_llm_residency.backend import BatchItem, GenerationSettings

    profile, path = _resolve(RANDOM)
    manager = _manager()
    items = [
        BatchItem(
            PreparedInputs.text("Caption this image.", ImagePart(image)),
            GenerationSettings(
                max_new_tokens=12, temperature=0.9, seed=seed, enable_reasoning=False
            ),
        )
        for seed, image in enumerate(_images(5))
    ]
    singles = [manager.run(profile, path, item.inputs, item.settings) for item in items]
    seen: set[int] = set()
    batch = manager.run_batch(
        profile, path, items, on_token=lambda index, token, text: seen.add(index)
    )
    for single, batched in zip(singles, batch, strict=True):
        _assert_same_answer(single.response, batched.response)
    assert len({r.response for r in singles}) > 1  # the order would show
    assert seen == set(range(5))
    for index, result in enumerate(batch):
        metadata = result.metadata.to_dict()
        assert (metadata["batched"], metadata["batch_size"], metadata["batch_index"]) == (
            True,
            5,
            index,
        )
        assert metadata["output_tokens"] == singles[index].metadata.to_dict()["output_tokens"]
        assert metadata["generation_settings"]["seed"] == index


def test_the_caption_node_sends_its_images_as_one_vllm_batch(world: Path) -> None:
    from comfy_api.latest import io
    from comfy_llm._comfyui._caption_node import CaptionImagesNode
    from comfy_llm._comfyui._modal_llm import ModalLLMNode
    from comfy_llm_core import item_seed

    images = np.random.default_rng(5).random((4, 32, 32, 3), dtype=np.float32)
    sampling = {"temperature": 0.8, "seed": 3, "max_new_tokens": 10, "enable_reasoning": False}
    CaptionImagesNode.hidden = io.HiddenHolder(unique_id="9")
    captions, metadata_json = CaptionImagesNode.execute(
        model_profile=RANDOM,
        prompt="Caption it.",
        images=images,
        batch_size=4,
        # the answers as the engine gave them: the cleanup rules would fold
        # random weights' newlines into spaces, which the single run keeps
        clean_think_tags=False,
        clean_whitespace=False,
        clean_quotes=False,
        clean_repetition=False,
        **sampling,
    ).args
    metadata = json.loads(metadata_json)
    ModalLLMNode.hidden = io.HiddenHolder(unique_id="7")
    singles = [  # each image's own seed (comfy_llm_core.item_seed) reproduces its caption
        ModalLLMNode.execute(
            prompt="Caption it.",
            model_profile=RANDOM,
            images=images[i : i + 1],
            **{**sampling, "seed": item_seed(3, f"image {i + 1}")},
        ).args[0]
        for i in range(4)
    ]
    assert captions == singles
    assert metadata["batched"] is True and metadata["engine_batch_size"] == 4
    assert [r["batch_size"] for r in metadata["per_image"]] == [4, 4, 4, 4]
    assert metadata["last_request"]["engine"] == "vllm"


class Cancelled(BaseException):
    """Like ComfyUI's InterruptProcessingException: not an Exception."""


def test_cancel_mid_batch_aborts_every_request_and_the_engine_serves_the_next(
    world: Path,
) -> None:
    from comfy_llm_inputs import PreparedInputs
    from comfy_llm_residency.backend import BatchItem, GenerationSettings

    profile, path = _resolve(SCRIPTED)
    manager = _manager()
    settings = GenerationSettings(max_new_tokens=16, temperature=0.0)
    manager.run(profile, path, PreparedInputs.text("warm"), settings)  # resident first
    backend = manager._resident[profile.profile_id].backend
    items = [BatchItem(PreparedInputs.text(f"stop {n}"), settings) for n in range(4)]
    tokens: list[int] = []

    def cancel_on_the_second_token(index: int, token_id: int, text: str) -> None:
        tokens.append(index)
        if len(tokens) == 2:
            raise Cancelled

    with pytest.raises(Cancelled):
        manager.run_batch(profile, path, items, on_token=cancel_on_the_second_token)
    assert len(tokens) == 2  # nothing reached the callback after it raised
    aborted = dict(backend.last_batch_abort)
    assert len(aborted) == 4 and all(rid.startswith("comfy-llm-") for rid in aborted)
    assert set(aborted.values()) == {"abort"}  # the scripted answer needs 6 tokens
    assert backend._engine.output_processor.get_num_unfinished_requests() == 0
    # the same engine serves the next request, and a whole batch after it
    again = manager.run(profile, path, PreparedInputs.text("again"), settings)
    assert (again.response, again.reasoning) == ("answer", "a b")
    assert again.metadata.to_dict()["cache_status"] == "warm"
    batch = manager.run_batch(profile, path, items[:2])
    assert [r.response for r in batch] == ["answer", "answer"]
    assert manager._resident[profile.profile_id].backend is backend


def test_cancel_reaches_the_requests_still_queued_for_preprocessing(world: Path) -> None:
    """64 requests, Cancel at the first token: none runs on, and it stops at once.

    vLLM preprocesses every multimodal request on one thread before it registers
    it (renderers/base.py 146-166, async_llm.py 491/572), where ``abort(request_id)``
    cannot reach it. On a GPU the first token comes long before a chunk of images is
    preprocessed; here a text request (tokenized on another thread) gives the first
    token while 63 requests of 8 images each wait for that thread.
    """
    from comfy_llm_inputs import ImagePart, PreparedInputs
    from comfy_llm_residency.backend import BatchItem, GenerationSettings

    profile, path = _resolve(RANDOM)
    manager = _manager()
    warm = GenerationSettings(max_new_tokens=2, temperature=0.0, enable_reasoning=False)
    manager.run(profile, path, PreparedInputs.text("warm"), warm)  # resident first
    backend = manager._resident[profile.profile_id].backend
    # random weights never stop early: every request would run its 256 tokens
    settings = GenerationSettings(
        max_new_tokens=256, min_new_tokens=256, temperature=0.0, enable_reasoning=False
    )
    frames = _images(63 * 8)
    items = [BatchItem(PreparedInputs.text("Say something."), settings)]
    items += [
        BatchItem(
            PreparedInputs.text(
                "Caption these.", *(ImagePart(f) for f in frames[8 * n : 8 * n + 8])
            ),
            settings,
        )
        for n in range(63)
    ]
    cancelled: list[float] = []
    registered: list[int] = []

    def cancel_at_the_first_token(index: int, token_id: int, text: str) -> None:
        cancelled.append(time.perf_counter())
        registered.append(len(backend._engine.output_processor.request_states))
        raise Cancelled

    with pytest.raises(Cancelled):
        manager.run_batch(profile, path, items, on_token=cancel_at_the_first_token)
    stop_seconds = time.perf_counter() - cancelled[0]
    finishes = dict(backend.last_batch_abort)
    ran_to_the_end = sorted(rid for rid, finish in finishes.items() if finish != "abort")
    print(
        f"Cancel of 64 requests ({registered[0]} registered in the engine, the rest queued "
        f"for preprocessing): stopped {stop_seconds:.2f} s after the first token"
    )
    assert len(finishes) == 64
    assert ran_to_the_end == []  # queued ones included: none generated its 256 tokens
    assert backend._engine.output_processor.get_num_unfinished_requests() == 0
    assert stop_seconds < 60  # generous on a loaded box; the figure is printed above
    # the engine serves the next batch at once
    again = manager.run_batch(profile, path, items[:2], on_token=lambda *_: None)
    assert [r.metadata.to_dict()["output_tokens"] for r in again] == [256, 256]
