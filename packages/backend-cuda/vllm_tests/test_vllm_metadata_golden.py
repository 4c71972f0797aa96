"""vLLM's ``metadata_json`` and rendered prompts stay as they are (see comfy-node's
``tests/test_metadata_golden.py`` for the other engines and the record's rules).

The module starts from a fresh manager, execution-mode state and storage root,
so its first request downloads and loads cold and eager, whatever ran before
it in the session.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from comfy_llm_testworld.golden import (
    check_golden,
    node_requests,
    node_run,
    recorded_chat_prompts,
)

pytestmark = pytest.mark.slow

GOLDEN = Path(__file__).parent / "golden"


@pytest.mark.timeout(1800)  # one engine start: minutes on a crowded box
def test_node_metadata_and_prompts_unchanged(
    world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import comfy_execution.utils as execution
    from comfy_llm._pipeline import forget_resolved_profiles
    from comfy_llm_backend_cuda import execution_modes
    from comfy_llm_residency import PsutilMemoryProbe, create_backend, get_manager, reset_managers

    def host_measured_manager() -> None:  # as conftest's: no GPU to measure here
        get_manager(
            "local_cuda", backend_factory=create_backend, memory_probe=PsutilMemoryProbe("cpu")
        )

    reset_managers()
    execution_modes().reset()
    forget_resolved_profiles()
    monkeypatch.setenv("COMFY_MODAL_LOCAL_LLM_STORAGE_ROOT", str(tmp_path / "storage"))
    host_measured_manager()
    execution.current = execution.ExecutionContext("golden-1", "7", None)
    try:
        with recorded_chat_prompts() as prompts:
            runs = [node_run(**request) for request in node_requests(tmp_path, second_model=None)]
    finally:
        execution.current = None
        reset_managers()
        execution_modes().reset()
        forget_resolved_profiles()
        host_measured_manager()
    check_golden(GOLDEN / "node_vllm.json", {"runs": runs, "prompts": prompts})
