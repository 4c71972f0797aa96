"""``modal_compile_cache_warm``: this model's own compiled graphs, not any file in the namespace."""

from __future__ import annotations

from pathlib import Path

import pytest
from comfy_llm_modal_remote.worker._engine import _compiled_graphs, _found_own_graphs

NAMESPACE = "H100_80GB-py3.11-vllm0.32.0-abc"


def _graph(root: Path, name: str) -> None:
    (root / NAMESPACE / "vllm" / "torch_compile_cache" / name / "rank_0_0").mkdir(parents=True)


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COMFY_MODAL_LLM_COMPILE_CACHE_ROOT", str(tmp_path))
    return tmp_path


def test_a_first_compile_next_to_another_models_graphs_is_not_warm(root: Path) -> None:
    _graph(root, "model-a-hash")
    before = _compiled_graphs()
    _graph(root, "model-b-hash")  # this load compiled model B
    assert _found_own_graphs(NAMESPACE, before) is False


def test_a_load_that_compiled_nothing_new_found_its_graphs(root: Path) -> None:
    _graph(root, "model-a-hash")
    before = _compiled_graphs()
    assert _found_own_graphs(NAMESPACE, before) is True


def test_an_empty_namespace_is_not_warm_and_no_root_is_unknown(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _compiled_graphs()
    _graph(root, "model-a-hash")
    assert _found_own_graphs(NAMESPACE, before) is False
    assert _found_own_graphs(None, before) is None
    monkeypatch.delenv("COMFY_MODAL_LLM_COMPILE_CACHE_ROOT")
    assert _compiled_graphs() is None and _found_own_graphs(NAMESPACE, None) is None
