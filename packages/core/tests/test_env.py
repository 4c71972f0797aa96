"""env_set: the one way packages write a variable their engine's processes inherit."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from comfy_llm_core import env_set


def test_env_set_writes_for_children_and_keeps_an_existing_value_on_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("COMFY_LLM_TEST_SET", raising=False)
    assert env_set("COMFY_LLM_TEST_SET", "a") == "a"
    assert env_set("COMFY_LLM_TEST_SET", "b", overwrite=False) == "a"
    assert env_set("COMFY_LLM_TEST_SET", "c") == "c"
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.environ['COMFY_LLM_TEST_SET'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert child.stdout.strip() == "c" == os.environ["COMFY_LLM_TEST_SET"]


def test_env_scope_sets_for_the_block_and_restores_exactly(monkeypatch) -> None:
    import os

    from comfy_llm_core import env_scope

    monkeypatch.setenv("COMFY_SCOPE_KEPT", "user")
    monkeypatch.delenv("COMFY_SCOPE_NEW", raising=False)
    before = dict(os.environ)
    with env_scope({"COMFY_SCOPE_KEPT": "engine", "COMFY_SCOPE_NEW": "x", "HOME": None}):
        assert os.environ["COMFY_SCOPE_KEPT"] == "engine"
        assert os.environ["COMFY_SCOPE_NEW"] == "x"
        assert "HOME" not in os.environ
    assert dict(os.environ) == before


def test_env_scope_also_undoes_what_the_block_itself_wrote(monkeypatch) -> None:
    # vLLM writes its own settings into os.environ while it builds an engine
    # (platforms/cpu.py: LD_PRELOAD, NUMEXPR_MAX_THREADS, ...): the host keeps none.
    import os

    from comfy_llm_core import env_scope

    monkeypatch.setenv("COMFY_SCOPE_USER", "user")
    monkeypatch.setenv("COMFY_SCOPE_GONE", "kept")
    monkeypatch.delenv("COMFY_SCOPE_WRITTEN", raising=False)
    before = dict(os.environ)
    with env_scope({"COMFY_SCOPE_SET": "engine"}):
        os.environ["COMFY_SCOPE_WRITTEN"] = "by the library"
        os.environ["COMFY_SCOPE_USER"] = "overwritten"
        del os.environ["COMFY_SCOPE_GONE"]
    assert dict(os.environ) == before
