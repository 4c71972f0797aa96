"""Real llama.cpp on the CPU: the tiny SmolVLM GGUF pair, text and images, through the backend."""

from __future__ import annotations

import gc
import json

import psutil
import pytest
from comfy_llm_backend_llamacpp import BackendUnloadedError, LlamaCppBackend
from comfy_llm_core import Modality
from comfy_llm_inputs import ImagePart, PreparedInputs
from comfy_llm_reasoning import parser_for_profile
from comfy_llm_residency import UnsupportedInputError
from comfy_llm_residency.backend import GenerationSettings
from comfy_llm_testworld.checkpoints import SCRIPTED_ANSWER, SCRIPTED_REASONING
from comfy_llm_testworld.gguf_checkpoints import GgufPair, write_gguf_pair
from PIL import Image

pytestmark = pytest.mark.slow

_PROMPT = PreparedInputs.text("describe the image please")
_IMAGE = PreparedInputs.text(
    "describe the image please", ImagePart(Image.new("RGB", (48, 40), (200, 30, 30)))
)


class Recorder:
    """A token sink that records every call (and may cancel after ``stop_after``)."""

    def __init__(self, stop_after: int | None = None) -> None:
        self.calls: list[tuple[int, str]] = []
        self.opened: list[bool] = []
        self.waits = 0
        self.stop_after = stop_after

    def token(self, token_id: int, text: str) -> None:
        self.calls.append((token_id, text))
        if self.stop_after is not None and len(self.calls) >= self.stop_after:
            raise KeyboardInterrupt("cancelled")

    def step(self, token_ids, text: str) -> None:
        for token_id in token_ids:
            self.token(token_id, text)

    def prompt_opened(self, opened: bool) -> None:
        self.opened.append(opened)

    def wait(self) -> None:
        self.waits += 1


@pytest.fixture(scope="module")
def scripted(scripted_pair: GgufPair):
    backend = LlamaCppBackend.open(
        scripted_pair.model, scripted_pair.mmproj, reasoning_parser="qwen3", context_tokens=512
    )
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def random_model(gguf_pair: GgufPair):
    backend = LlamaCppBackend.open(gguf_pair.model, gguf_pair.mmproj, context_tokens=512)
    yield backend
    backend.close()


def _parse(backend: LlamaCppBackend, result, *, enable_reasoning: bool = True):
    parser = parser_for_profile(
        "qwen3", None, enable_reasoning=enable_reasoning, vocabulary=backend.vocabulary
    )
    return parser.parse(
        result.token_ids, result.text, prompt_opened_reasoning=result.prompt_opened_reasoning
    )


@pytest.mark.parametrize("inputs", [_PROMPT, _IMAGE], ids=["text", "image"])
def test_scripted_model_thinks_then_answers(scripted: LlamaCppBackend, inputs) -> None:
    recorder = Recorder()
    result = scripted.generate(
        inputs, GenerationSettings(temperature=0, max_new_tokens=16), recorder
    )
    parsed = _parse(scripted, result)
    assert (parsed.reasoning, parsed.response) == (SCRIPTED_REASONING, SCRIPTED_ANSWER)
    assert result.text == " a b</think> answer"  # <think> is kept, the end token is not
    assert result.finish_reason == "stop" and result.prompt_opened_reasoning
    assert recorder.opened == [True]
    # one call per token, each with the text so far; the last one is the whole text
    assert [c[0] for c in recorder.calls] == list(result.token_ids)
    assert recorder.calls[-1][1] == result.text
    assert recorder.waits >= 1  # a cancel point during prefill


def test_image_tokens_go_through_the_projector(scripted: LlamaCppBackend) -> None:
    settings = GenerationSettings(temperature=0, max_new_tokens=4)
    text = scripted.generate(_PROMPT, settings, Recorder())
    image = scripted.generate(_IMAGE, settings, Recorder())
    # 48x40 -> 64 px longest edge: 2x2 tiles of 32 px plus a global view, one token each,
    # wrapped in <fake_token_around_image>/<row_r_col_c>/<global-img> and "\n" tokens
    assert image.timings.prompt_tokens - text.timings.prompt_tokens >= 5


def test_thinking_disabled_is_a_direct_answer(scripted: LlamaCppBackend) -> None:
    result = scripted.generate(
        _PROMPT, GenerationSettings(temperature=0, enable_reasoning=False), Recorder()
    )
    parsed = _parse(scripted, result, enable_reasoning=False)
    assert not result.prompt_opened_reasoning
    assert (parsed.reasoning, parsed.response) == ("", SCRIPTED_ANSWER)


def test_cancel_between_tokens_leaves_the_model_usable(scripted: LlamaCppBackend) -> None:
    settings = GenerationSettings(temperature=0, max_new_tokens=16)
    cancel = Recorder(stop_after=2)
    with pytest.raises(KeyboardInterrupt):
        scripted.generate(_IMAGE, settings, cancel)
    assert len(cancel.calls) == 2
    again = scripted.generate(_IMAGE, settings, Recorder())
    assert _parse(scripted, again).response == SCRIPTED_ANSWER


def test_cancel_during_prefill(scripted: LlamaCppBackend) -> None:
    class CancelInPrefill(Recorder):
        def wait(self) -> None:
            raise KeyboardInterrupt("cancelled in prefill")

    callback = CancelInPrefill()
    with pytest.raises(KeyboardInterrupt, match="prefill"):
        scripted.generate(_IMAGE, GenerationSettings(temperature=0), callback)
    assert callback.calls == []


def test_schema_waits_for_the_end_of_reasoning(scripted: LlamaCppBackend) -> None:
    schema = json.dumps(
        {
            "type": "object",
            "properties": {"n": {"type": "integer"}},
            "required": ["n"],
            "additionalProperties": False,
        }
    )
    settings = GenerationSettings(temperature=0, max_new_tokens=40, response_schema=schema)
    result = scripted.generate(_PROMPT, settings, Recorder())
    parsed = _parse(scripted, result)
    assert result.constrained
    assert parsed.reasoning == SCRIPTED_REASONING  # free before </think>
    assert isinstance(json.loads(parsed.response)["n"], int), (result.text, result.token_ids)


def test_schema_on_the_whole_answer_without_reasoning(random_model: LlamaCppBackend) -> None:
    schema = json.dumps(
        {
            "type": "object",
            "properties": {"label": {"enum": ["red", "blue"]}},
            "required": ["label"],
        }
    )
    settings = GenerationSettings(
        temperature=0.9, seed=3, max_new_tokens=40, response_schema=schema, enable_reasoning=False
    )
    result = random_model.generate(_IMAGE, settings, Recorder())
    assert result.finish_reason == "stop"
    assert json.loads(result.text) in ({"label": "red"}, {"label": "blue"})


def test_seed_reproduces_and_varies(random_model: LlamaCppBackend) -> None:
    def run(seed: int | None) -> tuple[int, ...]:
        settings = GenerationSettings(temperature=1.0, top_p=1.0, seed=seed, max_new_tokens=24)
        return random_model.generate(_IMAGE, settings, Recorder()).token_ids

    first = run(7)
    assert run(7) == first
    assert run(8) != first
    # seeds fold mod 2**32 - 1 (0xFFFFFFFF would mean "random" to llama.cpp)
    assert run(7 + 0xFFFFFFFF) == first


def test_greedy_is_deterministic_and_reports_timings(random_model: LlamaCppBackend) -> None:
    settings = GenerationSettings(temperature=0, max_new_tokens=12)
    first = random_model.generate(_IMAGE, settings, Recorder())
    second = random_model.generate(_IMAGE, settings, Recorder())
    assert first.token_ids == second.token_ids
    assert len(first.token_ids) == 12 and first.finish_reason == "length"
    assert first.timings.generation_seconds > 0  # the sink measures the token times
    metadata = random_model.runtime_metadata()
    assert metadata["engine"] == "llama.cpp" and metadata["llama_cpp_python_version"] == "0.3.36"
    assert (metadata["gpu_offload"], metadata["gpu_layers"], metadata["gpu_layers_total"]) == (
        "none",
        0,
        3,
    )
    assert (metadata["quantization"], metadata["projector_type"]) == ("F32", "idefics3")
    assert metadata["prompt_tokens"] == first.timings.prompt_tokens


def test_text_only_model_refuses_images(gguf_pair: GgufPair) -> None:
    backend = LlamaCppBackend.open(gguf_pair.model, context_tokens=256)
    try:
        result = backend.generate(
            _PROMPT, GenerationSettings(temperature=0, max_new_tokens=4), Recorder()
        )
        assert len(result.token_ids) == 4
        assert Modality.IMAGE not in backend.modalities  # the manager refuses it first
        with pytest.raises(UnsupportedInputError, match="does not take image input"):
            backend.generate(_IMAGE, GenerationSettings(), Recorder())
    finally:
        backend.close()


def _rss() -> int:
    gc.collect()
    return psutil.Process().memory_info().rss


@pytest.fixture(scope="module")
def long_context_pair(tmp_path_factory: pytest.TempPathFactory) -> GgufPair:
    return write_gguf_pair(tmp_path_factory.mktemp("gguf-256k"), context_tokens=262144)


def _cycle(pair: GgufPair) -> tuple[LlamaCppBackend, int]:
    backend = LlamaCppBackend.open(pair.model, pair.mmproj, context_tokens=262144)
    backend.generate(_IMAGE, GenerationSettings(temperature=0, max_new_tokens=2), Recorder())
    loaded = _rss()
    backend.close()
    return backend, loaded


def test_close_returns_the_memory(long_context_pair: GgufPair) -> None:
    """A 256k context holds 64 MiB of f16 KV cache (cleared, so resident): close() returns it.

    What stays (~20 MiB of the ~85 MiB the first load takes) is glibc keeping
    small freed buffers for reuse; repeated loads do not grow it (next test).
    """
    before = _rss()
    backend, loaded = _cycle(long_context_pair)
    after = _rss()
    assert loaded - before > 64 * 2**20, (before, loaded)
    assert loaded - after > 60 * 2**20, (before, loaded, after)
    backend.close()  # twice is fine
    assert not backend.loaded
    with pytest.raises(BackendUnloadedError):
        backend.generate(_PROMPT, GenerationSettings(), Recorder())
    vocabulary = backend.vocabulary
    assert vocabulary is not None and vocabulary.id_of("</think>") == 409  # kept after close
    with pytest.raises(BackendUnloadedError):  # never a freed llama.cpp vocabulary
        vocabulary.decode([256])


def test_repeated_loads_do_not_leak(long_context_pair: GgufPair) -> None:
    """Each load takes 64 MiB of KV cache: five leaked loads would keep 320 MiB.

    The bound is two loads' worth: after other tests in the same process the
    allocator's arenas move by some tens of MiB (seen: 72 MiB), which is not a
    leak; a leak of every load is five times 64 MiB.
    """
    _cycle(long_context_pair)
    before = _rss()
    for _ in range(5):
        _cycle(long_context_pair)
    assert _rss() - before < 2 * 64 * 2**20
