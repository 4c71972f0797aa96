"""8-bit and NF4 at load, for real: bitsandbytes 0.50's CPU backend under Transformers.

``tiny-owner/smolvlm-tiny:nf4`` goes the product's way (fake Hub, ``local_cpu``
resolution, staging, ``create_backend``), and the model that loads has
bitsandbytes layers in place of its linear layers, answers text and image
prompts, and says which quantization ran. The profile's weight figure is
compared with what the loaded model really holds, for both tiny families.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_core import ExecutionTarget, install_command
from comfy_llm_inputs import ImagePart, PreparedInputs
from comfy_llm_profiles import ModelProfile, registry_for
from comfy_llm_profiles._config_defaults import with_class_defaults
from comfy_llm_profiles._load_quantization import LOAD_QUANTIZATIONS, quantized_weight_bytes
from comfy_llm_residency.backend import BatchItem, GenerationSettings
from comfy_llm_testworld import FakeHub
from comfy_llm_testworld.sinks import RecordingSink
from comfy_llm_testworld.staged import staged_profile
from PIL import Image

REPO = "tiny-owner/smolvlm-tiny"


@pytest.fixture(scope="module")
def staged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[Any, Path]]]:
    """``none``, ``int8`` and ``nf4`` profiles of one commit, and its one snapshot."""
    from comfy_llm_testworld.checkpoints import build_checkpoint_files

    root = tmp_path_factory.mktemp("bnb-storage")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HOME", str(tmp_path_factory.mktemp("bnb-hf-home")))
        patch.delenv("HF_TOKEN", raising=False)
        hub = FakeHub()
        with hub:
            hub.add_repo(REPO, build_checkpoint_files("smolvlm"))
            found = {}
            for tag in ("", ":int8", ":nf4"):
                found[tag.lstrip(":") or "none"] = staged_profile(
                    REPO + tag, ExecutionTarget.LOCAL_CPU, storage_root=root, endpoint=hub.endpoint
                )
        assert not hub.internal_errors, hub.internal_errors
        yield found


def test_a_tag_resolves_a_profile_of_its_own(staged: dict[str, tuple[Any, Path]]) -> None:
    profiles: dict[str, ModelProfile] = {name: p for name, (p, _) in staged.items()}
    assert {p.quantization_method for p in profiles.values()} == {"none", "bnb_int8", "bnb_nf4"}
    assert len({p.profile_id for p in profiles.values()}) == 3
    assert {p.revision for p in profiles.values()} == {profiles["none"].revision}
    assert {p.backend for p in profiles.values()} == {"transformers"}
    # one commit, one snapshot: the weights are quantized as they load, not downloaded again
    assert len({path for _, path in staged.values()}) == 1
    assert (
        profiles["nf4"].estimated_memory_bytes
        < profiles["int8"].estimated_memory_bytes
        < profiles["none"].estimated_memory_bytes
    )


@pytest.mark.parametrize(("tag", "layer"), [("int8", "Linear8bitLt"), ("nf4", "Linear4bit")])
def test_bitsandbytes_quantizes_and_runs_on_the_cpu(
    staged: dict[str, tuple[Any, Path]], tag: str, layer: str
) -> None:
    from comfy_llm_backend_cuda import create_backend

    profile, path = staged[tag]
    events: list[Any] = []
    backend = create_backend(profile, path, events.append)
    try:
        model = backend._model  # type: ignore[attr-defined]
        kinds = [type(m).__name__ for m in model.modules()]
        assert kinds.count(layer) > 0 and "Linear" in kinds  # lm_head stays full precision
        meta = backend.runtime_metadata()
        assert meta["quantization_method"] == LOAD_QUANTIZATIONS[f"bnb_{tag}"].name
        assert meta["quantization"] == LOAD_QUANTIZATIONS[f"bnb_{tag}"].label
        assert meta["quantization_library"] == "bitsandbytes 0.50.2"
        assert meta["quantized_linear_layers"] == kinds.count(layer)
        assert meta["device"] == "cpu"
        assert any("bitsandbytes" in (e.message or "") for e in events)
        # LLM.int8() picks outlier columns over a whole batch: no batch equals its rows
        greedy = BatchItem(PreparedInputs.text("a"), GenerationSettings(temperature=0.0))
        assert backend.can_batch([greedy, greedy]) is (tag == "nf4")
        settings = GenerationSettings(max_new_tokens=6, temperature=0.0, enable_reasoning=False)
        image = ImagePart(Image.new("RGB", (48, 40), "red"))
        for inputs in (
            PreparedInputs.text("describe the image please"),
            PreparedInputs.text("describe", image),
        ):
            sink = RecordingSink()
            result = backend.generate(inputs, settings, sink)
            assert len(result.token_ids) == 6
            assert [token for token, _ in sink.calls] == list(result.token_ids)
    finally:
        backend.unload()
    assert backend.loaded is False


@pytest.mark.parametrize("kind", ["smolvlm", "qwen3_5"])
def test_the_weight_figure_is_what_the_loaded_model_holds(tmp_path: Path, kind: str) -> None:
    """The profile's runtime weights (before the target's overhead) within 5 % of the model.

    ``get_memory_footprint`` counts parameters and buffers; bitsandbytes keeps
    its scales beside the parameters (``QuantState.absmax``, ``Int8Params.SCB``),
    and they are added here, as the estimate counts them.
    """
    import torch
    from comfy_llm_testworld.checkpoints import write_checkpoint
    from transformers import AutoModelForImageTextToText, BitsAndBytesConfig

    checkpoint = write_checkpoint(kind, tmp_path / kind)
    config = with_class_defaults(json.loads((checkpoint / "config.json").read_text()))
    weight_bytes = sum(p.stat().st_size for p in checkpoint.glob("*.safetensors"))
    runtime = registry_for(ExecutionTarget.LOCAL_CPU).policy.runtime_dtype
    configs = {
        "bnb_int8": BitsAndBytesConfig(load_in_8bit=True),
        "bnb_nf4": BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.float32
        ),
    }
    for name, quantization in LOAD_QUANTIZATIONS.items():
        model = AutoModelForImageTextToText.from_pretrained(
            checkpoint, quantization_config=configs[name], device_map="cpu", dtype=torch.float32
        )
        held = model.get_memory_footprint() + _scale_bytes(model)
        estimated = quantized_weight_bytes(
            config,
            weight_bytes,
            checkpoint_dtype="float32",
            runtime_dtype=runtime,
            quantization=quantization,
        )
        assert abs(estimated - held) <= 0.05 * held, (name, estimated, held)


def _scale_bytes(model: Any) -> int:
    total = 0
    for module in model.modules():
        weight = getattr(module, "weight", None)
        state = getattr(weight, "quant_state", None)
        if state is not None:
            total += state.absmax.numel() * state.absmax.element_size()
        scales = getattr(weight, "SCB", None)
        if scales is not None:
            total += scales.numel() * scales.element_size()
    return total


def test_without_bitsandbytes_the_error_names_the_extra(
    staged: dict[str, tuple[Any, Path]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from comfy_llm_backend_cuda import QuantizationNotInstalledError, create_backend

    monkeypatch.setitem(sys.modules, "bitsandbytes", None)  # import raises ImportError
    profile, path = staged["nf4"]
    with pytest.raises(QuantizationNotInstalledError) as caught:
        create_backend(profile, path, lambda event: None)
    error = caught.value
    assert isinstance(error, ImportError) and error.name == "bitsandbytes"
    assert error.extra == "bitsandbytes" and install_command("bitsandbytes") in str(error)
    assert "bnb_nf4" in str(error) and ":nf4" in str(error)


@pytest.mark.parametrize(
    ("width", "rows", "packable"),
    [(4304, 64, False), (32, 64, False), (2048, 100, False), (2048, 64, True)],
)
def test_nf4_layers_of_any_shape_run_on_a_cpu_with_avx512_bf16(
    width: int, rows: int, packable: bool
) -> None:
    """SigLIP's 4304-wide MLP and the tiny checkpoints' 32-wide layers run; aligned ones
    keep bitsandbytes' packed AVX512-BF16 kernel. On a CPU without AVX512-BF16 every
    layer takes the plain kernel and this checks only that nothing is broken there."""
    import bitsandbytes
    import torch
    from bitsandbytes.functional import has_avx512bf16
    from comfy_llm_backend_cuda.transformers._quantize import (
        keep_unaligned_nf4_off_the_packed_cpu_path,
    )

    dense = torch.nn.Linear(width, rows, bias=False)
    layer = bitsandbytes.nn.Linear4bit(
        width, rows, bias=False, compute_dtype=torch.bfloat16, quant_type="nf4"
    )
    layer.weight = bitsandbytes.nn.Params4bit(
        dense.weight.data, requires_grad=False, quant_type="nf4"
    )
    model = torch.nn.Sequential(layer.to("cpu")).eval()
    sent = keep_unaligned_nf4_off_the_packed_cpu_path(model)
    fast = bool(has_avx512bf16())
    assert sent == (0 if packable or not fast else 1)
    assert layer.support_avx512bf16_for_cpu == (fast and packable)
    inputs = torch.randn(3, width, dtype=torch.bfloat16)
    # before the forward: the packed kernel repacks the weight in place at its first call
    reference = (
        inputs.float()
        @ bitsandbytes.functional.dequantize_4bit(layer.weight.data, layer.weight.quant_state)
        .float()
        .T
    )
    with torch.no_grad():
        answer = model(inputs)
    assert answer.shape == (3, rows)
    assert torch.allclose(answer.float(), reference, atol=0.5, rtol=0.1)
