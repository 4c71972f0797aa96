"""Fast checks of the pure-Python parts: thinking budget, prompt helpers, errors, lazy import."""

from __future__ import annotations

import pickle
import subprocess
import sys
from types import SimpleNamespace

import pytest
from comfy_llm_backend_mlx import (
    BackendUnloadedError,
    EngineNotInstalledError,
    ModelLoadError,
    UnsupportedBackendError,
    thinking_budget_for,
)
from comfy_llm_backend_mlx._prompt import template_kwargs
from comfy_llm_backend_mlx._thinking import ThinkingBudget
from comfy_llm_residency import BackendError

OPEN, CLOSE, NL, A, B, C, LINE = 100, 101, 5, 1, 2, 3, 9  # LINE's text ends with "\n"


def _budget(max_new_tokens: int, *, inside: bool = True, newline: bool = False) -> ThinkingBudget:
    return ThinkingBudget(
        max_new_tokens=max_new_tokens,
        open_id=OPEN,
        close_id=CLOSE,
        newline_id=NL if newline else None,
        starts_inside=inside,
        ends_line=lambda token_id: token_id in (NL, LINE),
    )


def _drive(budget: ThinkingBudget, model_tokens: list[int]) -> list[int]:
    """Generate like the engine: a forced token replaces the model's next choice."""
    out: list[int] = []
    choices = iter(model_tokens)
    while len(out) < budget.max_new_tokens:
        forced = budget.forced()
        token = forced if forced is not None else next(choices)
        if forced is not None:
            next(choices)  # the model's own choice is discarded
        out.append(token)
        budget.observe(token)
    return out


@pytest.mark.parametrize(("max_new_tokens", "cap"), [(1, 1), (2, 1), (3, 1), (4, 2), (512, 256)])
def test_the_cap_is_half_of_max_new_tokens(max_new_tokens: int, cap: int) -> None:
    assert thinking_budget_for(max_new_tokens) == cap
    assert _budget(max_new_tokens).budget == cap


def test_reasoning_over_budget_is_closed_and_the_model_answers() -> None:
    budget = _budget(8)
    assert _drive(budget, [A] * 8) == [A, A, A, A, CLOSE, A, A, A]
    assert budget.forced_close and not budget.inside
    assert budget.reasoning_tokens == 4


def test_a_newline_goes_before_the_close_when_the_template_wants_one() -> None:
    assert _drive(_budget(8, newline=True), [A] * 8) == [A, A, A, A, NL, CLOSE, A, A]


def test_no_newline_when_the_reasoning_already_ends_a_line() -> None:
    assert _drive(_budget(8, newline=True), [A, A, A, LINE] + [A] * 4)[4] == CLOSE


def test_no_newline_when_it_would_leave_no_room_to_answer() -> None:
    assert _drive(_budget(3, newline=True), [A, B, C]) == [A, CLOSE, C]


def test_a_model_that_closes_in_time_is_left_alone() -> None:
    budget = _budget(8)
    assert _drive(budget, [A, B, CLOSE, C, C, C, C, C]) == [A, B, CLOSE, C, C, C, C, C]
    assert not budget.forced_close


def test_nothing_is_forced_when_no_room_is_left() -> None:
    budget = _budget(1)
    assert _drive(budget, [A]) == [A]
    assert budget.forced() is None and not budget.forced_close


def test_counting_starts_at_a_generated_open_tag() -> None:
    budget = _budget(6, inside=False)
    assert _drive(budget, [C, OPEN, A, A, A, A]) == [C, OPEN, A, A, A, CLOSE]


def test_no_reasoning_block_means_no_cap() -> None:
    budget = _budget(4, inside=False)
    assert _drive(budget, [A, B, C, A]) == [A, B, C, A]
    assert budget.reasoning_tokens == 0


def test_the_budget_covers_the_whole_generation() -> None:
    # Budget 4: one token in the first block, so the second block gets three.
    expected = [A, CLOSE, OPEN, A, A, A, CLOSE, A]
    assert _drive(_budget(8), [A, CLOSE, OPEN, A, A, A, A, A]) == expected


def test_enable_thinking_is_explicit_for_qwen3_only() -> None:
    qwen = SimpleNamespace(reasoning_parser="qwen3", architecture="Qwen3_5ForConditionalGeneration")
    smol = SimpleNamespace(reasoning_parser="none", architecture="SmolVLMForConditionalGeneration")
    assert template_kwargs(qwen, enable_reasoning=True) == {"enable_thinking": True}  # type: ignore[arg-type]
    assert template_kwargs(qwen, enable_reasoning=False) == {"enable_thinking": False}  # type: ignore[arg-type]
    assert template_kwargs(smol, enable_reasoning=True) == {}  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("error", "builtin"),
    [
        (UnsupportedBackendError("hf-1", "backend", "vllm", "mlx_vlm"), ValueError),
        (EngineNotInstalledError("mlx_vlm", "mlx", "No module named 'mlx'"), ImportError),
        (ModelLoadError("mlx_vlm", "hf-1", "/snap", "model", "ValueError: bad"), RuntimeError),
        (BackendUnloadedError("hf-1"), RuntimeError),
    ],
)
def test_errors_keep_their_category_and_survive_pickling(
    error: BackendError, builtin: type[Exception]
) -> None:
    assert isinstance(error, BackendError) and isinstance(error, builtin)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error) and str(copy) == str(error)
    assert copy.__dict__ == error.__dict__


def test_the_package_imports_without_mlx_and_names_the_extra_when_loading() -> None:
    script = """
import sys
sys.modules["mlx"] = None
sys.modules["mlx_vlm"] = None
import comfy_llm_backend_mlx
from comfy_llm_backend_mlx import _backend
try:
    _backend._import_engine()
except comfy_llm_backend_mlx.EngineNotInstalledError as error:
    assert isinstance(error, ImportError)
    print(error)
else:
    raise SystemExit("no error")
"""
    completed = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert completed.returncode == 0, completed.stderr
    from comfy_llm_core import install_command

    # The command that works from this install (a clone here), never a bare
    # `pip install "comfy-llm[apple]"` of a name that may not be on PyPI.
    assert install_command("apple") in completed.stdout
    assert 'pip install "comfy-llm[apple]"' not in completed.stdout
