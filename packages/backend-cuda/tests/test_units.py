"""Fast checks of the pieces around the engine: no model is loaded here."""

from __future__ import annotations

import hashlib
import pickle
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from comfy_llm_backend_cuda import (
    EngineNotInstalledError,
    PromptTooLongError,
    UnsupportedBackendError,
)
from comfy_llm_backend_cuda._stream import (
    IncrementalDecoder,
    NativeStreamDecoder,
    TokenStreamer,
    stream_decoder,
)
from comfy_llm_backend_cuda.transformers._engine import import_engine, plan_device
from comfy_llm_backend_cuda.transformers._generate import eos_ids
from comfy_llm_core import ExecutionTarget, install_command
from comfy_llm_inputs import ImagePart, PreparedInputs, VideoFramePart, chat_messages
from comfy_llm_profiles import ModelProfile
from comfy_llm_profiles._profile import ProfileLimits
from PIL import Image


def make_profile(dtype: str = "bfloat16", **options: object) -> ModelProfile:
    return ModelProfile(
        repository="owner/model",
        revision=hashlib.sha1(b"model").hexdigest(),
        execution_target=ExecutionTarget.LOCAL_CUDA,
        backend="transformers",
        architecture="Qwen3_5ForConditionalGeneration",
        model_type="qwen3_5",
        dtype=dtype,
        quantization_method="none",
        modalities=("text", "image"),
        limits=ProfileLimits.of(
            context_tokens=4096,
            max_images=4,
            max_video_frames=8,
            max_file_bytes=1 << 20,
            max_total_file_bytes=1 << 21,
            max_file_characters=10_000,
            max_pdf_pages=5,
            allow_mixed_image_video=True,
        ),
        reasoning_parser="qwen3",
        backend_options=tuple(options.items()),
        estimated_memory_bytes=1 << 30,
        weight_bytes=1 << 29,
        registry_version="test-1",
    )


def fake_torch(*, cuda: bool, bf16: bool = True) -> SimpleNamespace:
    return SimpleNamespace(
        cuda=SimpleNamespace(is_available=lambda: cuda, is_bf16_supported=lambda: bf16),
        float32="f32",
        float16="f16",
        bfloat16="bf16",
    )


# -- device and dtype ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dtype", "options", "cuda", "bf16", "device", "expected"),
    [
        ("bfloat16", {}, False, True, "cpu", "float32"),
        ("float16", {}, False, True, "cpu", "float32"),
        ("auto", {}, False, True, "cpu", "float32"),
        ("float32", {}, False, True, "cpu", "float32"),
        ("bfloat16", {"torch_dtype": "bfloat16"}, False, True, "cpu", "bfloat16"),
        ("bfloat16", {"torch_dtype": "float32", "device": "cpu"}, False, True, "cpu", "float32"),
        ("bfloat16", {"torch_dtype": "auto", "device": "cuda"}, True, True, "cuda", "bfloat16"),
        ("bfloat16", {}, True, False, "cuda", "float16"),
        ("auto", {}, True, True, "cuda", "auto"),
        ("float8_e4m3fn", {}, True, True, "cuda", "auto"),
        ("bfloat16", {"device": "cpu"}, True, True, "cpu", "float32"),
    ],
)
def test_plan_device(dtype, options, cuda, bf16, device, expected) -> None:
    torch = fake_torch(cuda=cuda, bf16=bf16)
    plan = plan_device(make_profile(dtype, **options), torch)
    assert (plan.device, plan.dtype_name) == (device, expected)
    assert plan.torch_dtype(torch) == ("auto" if expected == "auto" else getattr(torch, expected))


# -- messages -----------------------------------------------------------------------------


def test_messages_put_images_then_frames_then_text() -> None:
    images = (Image.new("RGB", (8, 8), "red"), Image.new("RGB", (8, 8), "green"))
    frames = tuple(
        VideoFramePart(image=Image.new("RGB", (8, 8), (i, i, i)), timestamp_seconds=i, index=i)
        for i in range(3)
    )
    inputs = PreparedInputs.text("P", *map(ImagePart, images), *frames, system_prompt="Sys")
    ordered = inputs.images_in_order()
    assert [im.getpixel((0, 0)) for im in ordered] == [
        (255, 0, 0),
        (0, 128, 0),
        (0, 0, 0),
        (1, 1, 1),
        (2, 2, 2),
    ]
    messages = chat_messages(inputs)
    assert messages[0] == {"role": "system", "content": [{"type": "text", "text": "Sys"}]}
    assert messages[1]["role"] == "user"
    assert messages[1]["content"] == [{"type": "image"}] * 5 + [{"type": "text", "text": "P"}]


# -- streaming ----------------------------------------------------------------------------

PIECES = {1: " hello", 2: " world", 3: "<end>", 4: "\xe2", 5: "\x82\xac"}


def byte_decode(ids) -> str:
    """Decode like a byte-level BPE: bytes joined, then UTF-8 with replacement."""
    raw = b"".join(PIECES[i].encode("latin-1") for i in ids if i != 3)
    return raw.decode("utf-8", errors="replace").lstrip()  # strips like SentencePiece


def test_incremental_decoder_matches_a_full_decode() -> None:
    decoder = IncrementalDecoder(byte_decode)
    texts = [decoder.push(token) for token in (1, 4, 5, 2, 3)]
    assert texts == ["hello", "hello", "hello€", "hello€ world", "hello€ world"]
    assert decoder.text == byte_decode([1, 4, 5, 2, 3])


def test_streamer_skips_the_prompt_and_reports_each_token() -> None:
    calls: list[tuple[int, str]] = []
    streamer = TokenStreamer(byte_decode, lambda t, s: calls.append((t, s)), clock=lambda: 5.0)
    streamer.put([[9, 9, 9]])  # the prompt
    streamer.put([1])
    streamer.put([2])
    streamer.put([3])
    streamer.end()
    assert calls == [(1, "hello"), (2, "hello world"), (3, "hello world")]
    assert streamer.token_ids == [1, 2, 3]
    assert streamer.started == 5.0


def test_streamer_lets_the_callback_error_through() -> None:
    class Stop(Exception):
        pass

    def on_token(token_id: int, text: str) -> None:
        raise Stop(token_id)

    streamer = TokenStreamer(byte_decode, on_token)
    streamer.put([[7]])
    with pytest.raises(Stop):
        streamer.put([1])
    assert streamer.token_ids == [1]


def test_eos_ids_accepts_int_list_or_none() -> None:
    assert eos_ids(SimpleNamespace(eos_token_id=5)) == {5}
    assert eos_ids(SimpleNamespace(eos_token_id=[5, 6])) == {5, 6}
    assert eos_ids(SimpleNamespace(eos_token_id=None)) == frozenset()


# -- packaging and errors -------------------------------------------------------------------


def test_import_is_light() -> None:
    code = (
        "import sys, comfy_llm_backend_cuda as m; "
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules, "
        "sorted(k for k in sys.modules if k.split('.')[0] in ('torch', 'transformers')); "
        "assert callable(m.create_backend)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_missing_engine_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(ImportError, match=re.escape(install_command("cuda"))) as caught:
        import_engine()
    assert isinstance(caught.value, EngineNotInstalledError)
    assert (caught.value.engine, caught.value.module) == ("transformers", "transformers")


@pytest.mark.parametrize(
    "error",
    [
        UnsupportedBackendError("hf-abc", "backend", "mlx_vlm", "transformers or vllm"),
        EngineNotInstalledError("transformers", "torch", "No module named 'torch'"),
        PromptTooLongError(5000, 4096),
    ],
)
def test_errors_pickle_and_keep_their_facts(error: Exception) -> None:
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert str(copy) == str(error)
    assert copy.__dict__ == error.__dict__


def _window_and_native(path: Path) -> tuple[Any, Any, Any]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(path))

    def decode(ids: Any) -> str:
        return str(tokenizer.decode(list(ids), skip_special_tokens=True))

    return tokenizer, IncrementalDecoder(decode), stream_decoder(tokenizer, decode)


def test_the_native_stream_decoder_gives_the_window_decoders_text(staged) -> None:
    tokenizer, window, native = _window_and_native(staged["qwen"].path)
    assert isinstance(native, NativeStreamDecoder)
    text = "<think>\nhé 日本 😀</think>\n\nAnswer: «€» ok<|im_end|>"
    ids = [int(i) for i in tokenizer.encode(text, add_special_tokens=False)]
    ids += list(range(200, 600, 7))  # byte-level pieces, partial UTF-8 sequences among them
    for token_id in ids:
        assert native.push(token_id) == window.push(token_id), token_id
    assert native.text == tokenizer.decode(ids, skip_special_tokens=True)
    assert "<|im_end|>" not in native.text and "😀" in native.text
    assert native.ids == window.ids == ids


def test_a_tokenizer_that_cleans_up_spaces_keeps_the_window_decoder(staged) -> None:
    tokenizer, _, _ = _window_and_native(staged["qwen"].path)
    tokenizer.clean_up_tokenization_spaces = True
    assert isinstance(stream_decoder(tokenizer, lambda ids: ""), IncrementalDecoder)
