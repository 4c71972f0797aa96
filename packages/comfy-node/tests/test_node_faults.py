"""The node under hostile tokens and out-of-range settings: what ComfyUI would show."""

from __future__ import annotations

import json
import traceback
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_testworld import FakeHub

from .conftest import GOOD_TOKEN, EchoingProxy, node_raises


def _execute(comfyui: Path, **kwargs: Any) -> Any:
    from comfy_api.latest import io
    from comfy_llm._comfyui._modal_llm import ModalLLMNode

    ModalLLMNode.hidden = io.HiddenHolder(unique_id="3")
    kwargs.setdefault("prompt", "hi")
    kwargs.setdefault("model_profile", "tiny/smolvlm")
    return ModalLLMNode.execute(**kwargs)


def _shown(error: BaseException) -> str:
    """What ComfyUI shows and logs: the message and the chained traceback."""
    return str(error) + "\n" + "".join(traceback.format_exception(error))


def test_seed_out_of_range_is_refused_before_any_request(
    model_hub: FakeHub, storage: Path, comfyui: Path
) -> None:
    from comfy_llm_residency import GenerationSettingsError

    with node_raises(GenerationSettingsError, match="18446744073709551615") as caught:
        _execute(comfyui, seed=1208925819614629174706176)
    assert isinstance(caught.value, GenerationSettingsError) and caught.value.field == "seed"
    assert model_hub.requests == []


def test_seed_widget_and_settings_share_one_bound(comfyui: Path) -> None:
    from comfy_llm._comfyui._caption_node import CaptionImagesNode
    from comfy_llm._comfyui._modal_llm import ModalLLMNode
    from comfy_llm_core.defaults import SEED_MAX
    from comfy_llm_residency import GenerationSettingsError
    from comfy_llm_residency.backend import GenerationSettings

    for node in (ModalLLMNode, CaptionImagesNode):
        seed = next(item for item in node.define_schema().inputs if item.id == "seed")
        assert seed.options["max"] == SEED_MAX, node.__name__
    assert GenerationSettings(seed=SEED_MAX).seed == SEED_MAX
    with pytest.raises(GenerationSettingsError):
        GenerationSettings(seed=SEED_MAX + 1)


def test_malformed_token_is_refused_without_echoing_it(
    model_hub: FakeHub, storage: Path, comfyui: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from comfy_llm_core import InvalidTokenError

    monkeypatch.setenv("HF_TOKEN", "hf_SeCrEtZq9\r\nX-Evil: 1")
    with node_raises(InvalidTokenError) as caught:
        _execute(comfyui)
    assert caught.shown is not None
    shown = _shown(caught.shown)
    assert "SeCrEtZq9" not in shown and "X-Evil" not in shown
    assert "HF_TOKEN" in str(caught.shown)
    assert model_hub.requests == []


def test_token_in_library_error_text_never_reaches_comfyui(
    echoing_proxy: EchoingProxy, storage: Path, comfyui: Path
) -> None:
    with pytest.raises(Exception) as caught:
        _execute(comfyui)
    # the message is composed from the answer's status, never from the library's text;
    # the library's error (token and all) is its cause, cut off before ComfyUI sees it
    assert "HTTP 400" in str(caught.value)
    assert GOOD_TOKEN not in _shown(caught.value)
    assert caught.value.__suppress_context__ and caught.value.__cause__ is None
    # the class goes to the log (the note ComfyUI's traceback prints), not the type shown
    assert type(caught.value).__module__ == "builtins"
    assert "HubUnavailableError (action: retry)" in _shown(caught.value)


def test_metadata_json_scrubs_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    from comfy_llm._comfyui._metadata import metadata_json
    from comfy_llm_residency import RunMetadata
    from comfy_llm_residency._run_metadata import MANAGER_KEYS

    monkeypatch.setenv("HF_TOKEN", GOOD_TOKEN)
    flat = dict.fromkeys(MANAGER_KEYS)  # every key the manager writes, empty
    flat.update(generation_settings={}, evicted_profiles=[], resident_profiles=[])
    flat.update(note=f"an engine said Bearer {GOOD_TOKEN}", n=1)  # what an engine reported
    text = metadata_json(RunMetadata.from_dict(flat))
    assert GOOD_TOKEN not in text and json.loads(text)["n"] == 1


def test_caption_node_errors_reach_comfyui_scrubbed_too(
    echoing_proxy: EchoingProxy, storage: Path, comfyui: Path
) -> None:
    import numpy as np
    from comfy_api.latest import io
    from comfy_llm._comfyui._caption_node import CaptionImagesNode

    CaptionImagesNode.hidden = io.HiddenHolder(unique_id="9")
    images = np.zeros((1, 8, 8, 3), dtype=np.float32)
    with pytest.raises(Exception) as caught:
        CaptionImagesNode.execute(model_profile="tiny/smolvlm", prompt="caption", images=images)
    assert GOOD_TOKEN not in _shown(caught.value)
    assert type(caught.value).__module__ == "builtins"
